"""Text that is safe to print on a terminal or to write into a log line, whatever it came from.

Actor keys, message bodies, error messages and request paths are chosen by whoever calls the API. Printed raw,
an ESC (``\\x1b[2J``) or a C1 control (``\\x9b``) clears or recolours the operator's screen, a CR or LF forges
a table row or a log line (``\\nERROR ...``), and a bidi override (U+202E) shows text in another order than it
is stored. Every CLI output and every plain-text log line goes through this module:

- `printable(text)` writes each such character as a visible escape: ``\\n``, ``\\r``, ``\\t``, ``\\x1b``,
  ``\\x9b``, ``\\u202e``; everything else (accents, CJK, emoji) is left as it is. Backslashes are not doubled:
  the output is for people, and the JSON forms (``--json``, Lambda's JSON logs) stay exact.
- `printable_lines(text)` does the same but keeps ``\\n`` as a line break, for multi-line text Dormant itself
  builds (tracebacks, divergence diffs); a CR is still escaped, so no line can overwrite another.
- `PrintableFormatter` is a logging formatter whose records keep to their line: the message escaped as by
  `printable`, a traceback's lines escaped one by one and indented below it.
- `json_text(text)` makes JSON text safe for a terminal without changing what it means: JSON escapes C0
  controls inside strings itself, and the other characters above may only occur inside its strings, where a
  four-hex-digit escape such as ``\\u001b`` is the same character (the tabs and line feeds of indented JSON,
  whitespace between its tokens, stay).

What counts as unsafe (`UNSAFE`): C0 controls and DEL, C1 controls (U+0080-U+009F), the bidi controls
(U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), the line and paragraph separators (U+2028, U+2029)
and lone surrogates (which cannot even be written as UTF-8).
"""

from __future__ import annotations

import logging
import re
from typing import Any

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# everything but C0 and the line feed: C1, DEL, bidi controls, line/paragraph separators, lone surrogates
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff"
UNSAFE = re.compile(f"[\x00-\x1f{_OTHERS}]")
_UNSAFE_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHERS}]")
# in JSON text a raw tab or line feed can only be whitespace between tokens (json.dumps escapes them in strings)
_UNSAFE_IN_JSON = re.compile(f"[\x00-\x08\x0b-\x1f{_OTHERS}]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    short = _SHORT.get(char)
    if short is not None:
        return short
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` on one line, with every control, line break and bidi control written as a visible escape."""
    return UNSAFE.sub(_escape, text)


def printable_lines(text: str) -> str:
    """Like `printable`, but line breaks (``\\n``) stay line breaks."""
    return _UNSAFE_BUT_NEWLINE.sub(_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"  # every unsafe character is in the BMP: one four-hex-digit \\u escape


def json_text(text: str) -> str:
    """JSON text (as `json.dumps(..., ensure_ascii=False)` writes it) with every unsafe character inside its
    strings written as a four-hex-digit escape (``\\u001b``): the same JSON value, nothing a terminal acts on."""
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


class PrintableFormatter(logging.Formatter):
    """`logging.Formatter` for plain-text logs: no record can end its line early or act on a terminal."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))

    def formatException(self, ei: Any) -> str:
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return _indented(super().formatStack(stack_info))


def _indented(text: str) -> str:
    # split on line feeds only: str.splitlines also breaks at \x1c-\x1e, \x85 and U+2028 (escaped instead)
    return "\n".join("    " + printable(line) for line in text.split("\n"))
