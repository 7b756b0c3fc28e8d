"""The approval page of a callback declared `callback(Approval)` (`GET/POST /callbacks/{token}/approve`).

A GET only shows the page: mail scanners and link previews fetch every link in an email, so nothing a GET does
may decide anything. The page's form posts the decision to the same URL. CSRF: there is no session or cookie to
ride on; a forged cross-site POST would need the token, and the token is the secret (as it is for the JSON
route), so the page's job is not to leak it: no external resources or links, `Referrer-Policy: no-referrer`,
`Cache-Control: no-store`, no framing (clickjacking), a CSP that allows inline style and a form to this origin
only. Every value shown is HTML-escaped; none comes from the request."""

from __future__ import annotations

from datetime import UTC, datetime
from html import escape

from fastapi.responses import HTMLResponse

from dormant.models import CallbackStatus

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
}
_STYLE = ("body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;color:#222}"
          "p.description{font-size:1.15rem;white-space:pre-wrap;overflow-wrap:anywhere}"
          "button{font-size:1rem;padding:.6rem 1.4rem;margin-right:1rem;border-radius:.3rem;border:1px solid #888;"
          "cursor:pointer}button.approve{background:#1f7a3a;color:#fff}button.reject{background:#fff}"
          ".muted{color:#666;font-size:.9rem}")
_ANSWERED = {
    "completed": "This request has been answered already.",
    "failed": "This request has been answered already.",
    "timed_out": "This request is no longer open: its time ran out.",
    "expired": "This request is no longer open: its time ran out.",
    "cancelled": "This request is no longer open: it was withdrawn.",
}


def _document(title: str, body: str, status: int) -> HTMLResponse:
    html = (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1"><title>{escape(title)}</title>'
            f"<style>{_STYLE}</style></head><body><h1>{escape(title)}</h1>{body}</body></html>")
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def _until(deadline: float | None) -> str:
    if deadline is None:
        return ""
    when = datetime.fromtimestamp(deadline, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f'<p class="muted">Open until {escape(when)}.</p>'


def confirmation(status: CallbackStatus, description: str | None) -> HTMLResponse:
    """The page a GET shows: the question and, while the callback is open, Approve and Reject buttons."""
    text = description or f"Approve {status.callback}?"
    question = f'<p class="description" id="description">{escape(text)}</p>'
    if status.status != "open":
        return _document("Approval", question + f'<p id="outcome">{escape(_ANSWERED.get(status.status, ""))}</p>',
                         200)
    form = ('<form method="post" id="decision">'
            '<button type="submit" name="decision" value="approve" class="approve" id="approve">Approve</button>'
            '<button type="submit" name="decision" value="reject" class="reject" id="reject">Reject</button>'
            "</form>")
    return _document("Approval", question + _until(status.deadline) + form, 200)


def decided(approved: bool, status: CallbackStatus) -> HTMLResponse:
    """The page a POST answers when its decision is stored (or was, the same one, before)."""
    if status.status == "accepted":
        text = "Approved. Thank you." if approved else "Rejected. Thank you."
    else:
        text = _ANSWERED.get(status.status, "This request has been answered already.")
    return _document("Approval", f'<p id="outcome">{escape(text)}</p>', 200)


def refused(status: int, message: str) -> HTMLResponse:
    """An error as a page (a person follows this link, not a program): the status and a message that echoes
    nothing from the request."""
    return _document("Approval", f'<p id="outcome">{escape(message)}</p>', status)
