"""dormant.core.safetext, as an attacker would probe it: whatever text goes in, nothing a terminal acts on comes out
(checked against Unicode's own categories, not the module's list), safe text is left alone, the escapes say
what was there, JSON keeps its meaning; and the log formatters and Lambda's JSON logs that use it."""

from __future__ import annotations

import ast
import json
import logging
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dormant.core.safetext import PrintableFormatter, json_text, printable, printable_lines
from dormant.dev.console import ConsoleFormatter

EXAMPLES = int(os.environ.get("DORMANT_PROPERTY_EXAMPLES", "150"))  # `make fuzz` runs more
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))
ROOT = Path(__file__).resolve().parents[2]

BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
HOSTILE = [chr(c) for c in range(0x20)] + ["\x7f"] + [chr(c) for c in range(0x80, 0xA0)] + list(BIDI) + [
    "\u2028", "\u2029", "\ud800", "\udfff", "\x1b[2J", "\x1b]0;title\x07", "\r\nERROR forged", "\\", "\\x1b", '"']
# any character, with the hostile ones (and sequences of them) far more often than chance would pick them
texts = st.lists(st.one_of(st.characters(), st.sampled_from(HOSTILE)), max_size=40).map("".join)
safe_texts = st.text(st.characters(exclude_categories=["Cc", "Cs", "Zl", "Zp"], exclude_characters=BIDI))


def acted_on(text: str, *, allowed: str = "") -> list[str]:
    """The characters of `text` a terminal or a log reader acts on, by Unicode category (independent of the
    module's own list): controls, surrogates, line and paragraph separators, bidi controls."""
    return [ch for ch in text if ch not in allowed and (
        unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp") or ch in BIDI)]


@SETTINGS
@given(texts)
def test_printable_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    shown = printable(text)
    assert acted_on(shown) == []
    assert "\n" not in shown and len(shown) <= 6 * len(text)


@SETTINGS
@given(texts.filter(lambda t: "\\" not in t))
def test_the_escapes_say_what_was_there(text: str) -> None:
    """Without backslashes in the input (which are not doubled) the output reads back, as a Python string
    literal, as the input: every escape names its character."""
    assert ast.literal_eval('"' + printable(text).replace('"', '\\"') + '"') == text


@SETTINGS
@given(safe_texts)
def test_safe_text_is_left_alone(text: str) -> None:
    assert printable(text) == text == printable_lines(text)


@SETTINGS
@given(texts)
def test_printable_lines_keeps_only_line_feeds(text: str) -> None:
    shown = printable_lines(text)
    assert acted_on(shown, allowed="\n") == []
    assert shown.split("\n") == [printable(line) for line in text.split("\n")]


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | texts,
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
                           max_leaves=12)


@SETTINGS
@given(json_values, st.sampled_from([None, 2, "\t"]))
def test_json_text_is_the_same_json_with_nothing_to_act_on(value: object, indent: int | str | None) -> None:
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    safe = json_text(text)
    assert json.loads(safe) == json.loads(text)
    assert acted_on(safe, allowed="\n\t") == []  # the indentation's whitespace, between tokens


def record(message: str, *args: object, error: BaseException | None = None) -> logging.LogRecord:
    exc_info = None
    if error is not None:
        try:
            raise error
        except BaseException:
            exc_info = sys.exc_info()
    return logging.LogRecord("dormant.http", logging.INFO, __file__, 1, message, args, exc_info)


@SETTINGS
@given(texts, texts)
def test_log_records_keep_to_their_lines(message: str, error_text: str) -> None:
    for formatter in (ConsoleFormatter(), PrintableFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")):
        line = formatter.format(record("GET %s ->", message, error=ValueError(error_text)))
        first, *rest = line.split("\n")
        assert acted_on(line, allowed="\n") == []
        assert printable(message) in first
        assert rest and all(text.startswith("    ") for text in rest)  # the traceback, indented below
        # the exception's message, its own line feeds indented like the rest of the traceback
        assert "ValueError" + (": " + printable_lines(error_text).replace("\n", "\n    ") if error_text else "") \
            in line


def test_a_forged_log_line_stays_inside_its_record() -> None:
    line = ConsoleFormatter().format(record("POST %s", "/actors/x\r\n2026-12-01 09:00:00.000 ERROR wake forged"))
    assert line.count("\n") == 0 and line.endswith("/actors/x\\r\\n2026-12-01 09:00:00.000 ERROR wake forged")


def test_lambda_json_logs_escape_what_json_leaves_raw() -> None:
    """The functions' powertools logger, in a fresh interpreter as in Lambda: C1 controls, DEL and bidi
    overrides in a key or a path come out as \\uXXXX (JSON already escapes C0), accents stay readable."""
    script = (
        "import logging\n"
        "from dormant.aws.telemetry import lambda_telemetry\n"
        "lambda_telemetry('dormant-api')\n"
        "logging.getLogger('dormant.http').info('GET %s -> 200', '/actors/x/\\u202eevil\\x9b31m\\x7f',\n"
        "    extra={'actor': 'x', 'key': 'Jos\\u00e9\\u2028\\u202e\\x1b[2J'})\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "POWERTOOLS_DEV": "0"})
    assert result.returncode == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert acted_on(line) == []
    assert "\\u202eevil\\u009b31m\\u007f" in line and "José\\u2028\\u202e\\u001b[2J" in line
    logged = json.loads(line)
    assert logged["message"] == "GET /actors/x/\u202eevil\x9b31m\x7f -> 200"
    assert logged["key"] == "José\u2028\u202e\x1b[2J" and logged["service"] == "dormant-api"
