"""Hypothesis strategies for fuzzed benchmark config files (issue 38, item 5).

A case starts from the shipped ``config/benchmark.toml`` plus a few tables it leaves commented out (a
``jsonl`` dataset with ``image_roots``, a mixture, a model's ``chat_template``, ``[rewards.judge]``), so
every kind of setting is there to be broken, and applies one to four mutations to the parsed document:

* delete a key (a table, a setting, a list element) at any level;
* add an unknown key at any level (random text, a hostile identifier, or a real setting of another table);
* replace a value with one of another type or an extreme one (0, negative, 2**64, nan, inf, empty,
  very long, unicode, path traversal, dates and times, lists and tables of them, near-valid grammar);
* rename a key (a model key or dataset name turned hostile);
* set a setting read by a grammar of its own or as a path (:data:`GRAMMARS`: curricula, follow policies,
  regular expressions, judge templates, model sources and checkpoint references, paths) to a near-valid value.

The document is then written back as TOML (:func:`toml_text`, which ``tomllib`` reads back to the same
document). Whole-file garbage (random bytes, invalid UTF-8, a truncated or UTF-16 file, arrays or tables nested
100,000 deep, TOML arrays of tables where tables belong), a missing file and a directory in place of the file
are cases too.
:func:`write_config_case` lays a case out in a folder (with the files its tables point at).
"""

from __future__ import annotations

import copy
import datetime as dt
import io
import math
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import strategies as st
from PIL import Image

SHIPPED_CONFIG = Path(__file__).resolve().parents[2] / "config" / "benchmark.toml"
CONFIG_NAME = "bench.toml"
EXTRA_TABLES = {
    "datasets": {"shapes": {"kind": "jsonl", "path": "shapes.jsonl", "image_roots": ["images"], "limit": 4},
                 "mix": {"kind": "mixture", "parts": ["easy_vqa", "shapes"], "weights": [0.5, 0.5], "limit": 4}},
    "models": {"tiny-qwen2-vl-easy-vqa": {"chat_template": "chat.jinja"}},
    "rewards": {"judge": {"model": "tiny-qwen2-vl"}},
}
"""What the shipped file leaves commented out, added to it so that these settings are fuzzed too: a ``jsonl``
dataset with ``image_roots``, a mixture, a model's ``chat_template`` file, ``[rewards.judge]``."""

Key = str | int
Path_ = tuple[Key, ...]


def _merged(into: dict, extra: dict) -> dict:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merged(into[key], value)
        else:
            into[key] = value
    return into


def base_document() -> dict:
    """The shipped config with :data:`EXTRA_TABLES`, as ``tomllib`` reads it."""
    return _merged(tomllib.loads(SHIPPED_CONFIG.read_text()), copy.deepcopy(EXTRA_TABLES))


# --- writing a document as TOML ---------------------------------------------------------------------

def _string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)  # repr: inf, -inf, 1e+300, -0.0
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_string(str(key))} = {_value(item)}" for key, item in value.items()) + "}"
    raise TypeError(f"no TOML for {type(value).__name__}")


def toml_text(document: dict) -> str:
    """``document`` as TOML: its top-level values first, then one ``[table]`` per top-level table whose own
    values (nested tables included) are written inline.

    >>> toml_text({"a": 1, "t": {"x": [1.5, "q\\""], "sub": {"k": float("inf")}}})
    '"a" = 1\\n["t"]\\n"x" = [1.5, "q\\\\""]\\n"sub" = {"k" = inf}\\n'
    """
    lines = [f"{_string(str(key))} = {_value(value)}" for key, value in document.items() if not isinstance(value, dict)]
    for key, table in document.items():
        if isinstance(table, dict):
            lines.append(f"[{_string(str(key))}]")
            lines.extend(f"{_string(str(name))} = {_value(value)}" for name, value in table.items())
    return "".join(line + "\n" for line in lines)


# --- values and keys ----------------------------------------------------------------------------------

HOSTILE_TEXT = (
    "", " ", "\t\n", "../../../../etc/passwd", "/", "/etc/passwd", "/dev/null", "~", "~nobody-here/x", ".", "..",
    "\x00", "a\x00b", "\u202eevil", "ünï’cødé", "😀" * 3, "x" * 300, "/" + "a" * 5000, "a/" * 2000,
    "embedded:", "embedded:no-such-model", "embedded:tiny-qwen2-vl", "run@latest", "run@-1", "@", "a@b@c",
    "every-0", "every-", "every-\u00b2", "every-" + "9" * 5000, "every-\u0663", "all", "final",
    "0: colour", "1: ; 2: x", "5: a @ 0", "5: a @ nan", "5: a @ inf", "9" * 5000 + ": a", "2: a; 1: b", ":", "@",
    "{{ messages }}", "{%", "{", "}", "{question} {response}", "{response.__class__}", "{0}", "{response!r:>10}",
    "(", "[", "a{4294967296}", "(?:" * 3000 + ")" * 3000, "(a*)*b", "\\",
    "s3://bucket/prefix", "file:///etc", "redis://", "memory://", "gs://", "http://[::1",
    "grpo", "ppo", "gspo", "k3", "fsdp2", "vllm", "hf", "lora_base", "cosine", "one_step_off", "celery", "k8s",
    "bfloat16", "float16", "jsonl", "parquet", "mixture", "easy_vqa", "docvqa", "arc", "tiny-qwen2-vl", "shapes",
)
"""Strings that are paths, identifiers, near-valid grammar (curricula, follow policies, templates,
regular expressions, checkpoint references) and valid choices of other settings."""
EXTREME_INTS = (0, -1, 1, 2, 3, 7, 2**31 - 1, 2**31, 2**63 - 1, -(2**63), 2**63, 2**64, 10**40, -(10**40))
EXTREME_FLOATS = (0.0, -0.0, 1e-300, 5e-324, 0.5, 1.0, 1.000001, 1e308, -1e308, math.inf, -math.inf, math.nan)

scalars = st.one_of(
    st.integers(), st.sampled_from(EXTREME_INTS),
    st.floats(), st.sampled_from(EXTREME_FLOATS),
    st.booleans(),
    st.text(max_size=24), st.sampled_from(HOSTILE_TEXT),
    st.builds(lambda char, count: char * count, st.characters(), st.integers(1_000, 50_000)),
    st.datetimes(timezones=st.none() | st.just(dt.UTC)), st.dates(), st.times(),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=12), inner, max_size=3), max_leaves=6)


def _setting_names() -> tuple[str, ...]:
    """Every key of the base document at any depth: a key from one table added to another."""
    names: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            names.update(map(str, node))
            for value in node.values():
                walk(value)
    walk(base_document())
    return tuple(sorted(names))


keys = st.one_of(st.text(max_size=16), st.sampled_from(HOSTILE_TEXT[:20]), st.sampled_from(_setting_names()),
                 st.sampled_from(("Tiny Qwen", "a" * 65, "A", "-x", "_", "__class__", "a.b", "a/b", "a'b")))


# --- settings with a grammar of their own -------------------------------------------------------------

def _joined(parts: st.SearchStrategy[str], max_size: int = 8) -> st.SearchStrategy[str]:
    return st.lists(parts, max_size=max_size).map("".join)


digits = st.one_of(st.integers(-3, 10**6).map(str), st.text("0123456789", max_size=30),
                   st.sampled_from(("0", "00", "\u00b2", "\u0663", "\uff11", "9" * 5000)))
curricula = st.lists(st.builds("{}:{} @ {}".format, digits, st.text(max_size=8), st.floats().map(str) | digits),
                     max_size=3).map("; ".join) | _joined(st.sampled_from(("1", ":", "@", ";", ",", " ", "a", "0.5")))
follow_policies = st.builds("every-{}".format, digits) | st.text(max_size=8)
regexes = _joined(st.sampled_from(("(", ")", "(?:", "(?P<n>", "[", "]", "*", "+", "?", "{", "}", "{4294967296}", "|",
                                   "\\", "a", "\\1", "(?<=", "(?i)", "^", "$"))) | st.integers(1, 5000).map(
    lambda depth: "(" * depth + ")" * depth)
templates = _joined(st.sampled_from(("{", "}", "{{", "}}", "{question}", "{response}", "{reference}", "{0}", "{}",
                                     "{response.x}", "{response[0]}", "{response!r}", "{response!z}",
                                     "{response:>{question}}", "text ")))
paths = st.one_of(
    st.sampled_from(("shapes.jsonl", "images", "images/red.png", "chat.jinja", "bench.toml", ".", "..", "/", "/proc",
                     "/dev/null", "/etc/passwd", "../../../../etc", "~", "~/x", "./missing", "a" * 256, "a/" * 2100,
                     "/" + "a" * 300, "x\x00y", "images\n", "./")),
    st.text(max_size=12))
GRAMMARS: dict[Path_, st.SearchStrategy[str]] = {
    ("training", "curriculum"): curricula,
    ("eval", "follow_checkpoints"): follow_policies,
    ("rewards", "regex_pattern"): regexes,
    ("rewards", "judge", "template"): templates,
    ("models", "tiny-qwen2-vl", "source"): paths.map(lambda path: path if path.startswith(("/", ".", "~")) else
                                                     "./" + path) | paths | st.builds("{}@{}".format, paths, digits),
    ("models", "tiny-qwen2-vl-easy-vqa", "chat_template"): paths,
    ("datasets", "shapes", "path"): paths,
    ("datasets", "shapes", "image_roots"): st.lists(paths, max_size=2),
    ("storage", "cache_url"): paths,
    ("executor", "celery_dir"): paths,
}
"""Settings read by a grammar of their own (curricula, follow policies, regular expressions, templates) or as
paths, each with near-valid values of that grammar."""


# --- mutations -----------------------------------------------------------------------------------------

def value_paths(document: object, prefix: Path_ = ()) -> list[Path_]:
    """The path of every value in ``document``: each table key and list index, at every level."""
    paths: list[Path_] = []
    items = document.items() if isinstance(document, dict) else enumerate(document) if isinstance(
        document, list) else ()
    for key, value in items:
        paths.append((*prefix, key))
        paths.extend(value_paths(value, (*prefix, key)))
    return paths


def table_paths(document: object, prefix: Path_ = ()) -> list[Path_]:
    """The path of every table in ``document``, the document itself first."""
    paths = [prefix] if isinstance(document, dict) else []
    items = document.items() if isinstance(document, dict) else enumerate(document) if isinstance(
        document, list) else ()
    for key, value in items:
        paths.extend(table_paths(value, (*prefix, key)))
    return paths


def _at(document: dict, path: Path_) -> object:
    for key in path:
        document = document[key]
    return document


@st.composite
def mutation(draw, document: dict) -> str:
    """Apply one mutation to ``document`` in place; the words that say what it did."""
    paths = value_paths(document)
    kind = draw(st.sampled_from(("delete", "add", "replace", "replace", "rename", "grammar"))) if paths else "add"
    tables = table_paths(document)
    targets = [path for path in GRAMMARS if path[:-1] in tables]  # set, or added to its table
    if kind == "grammar" and targets:
        path = draw(st.sampled_from(targets))
        value = draw(GRAMMARS[path])
        _at(document, path[:-1])[path[-1]] = value
        return f"set {list(path)} = {value!r:.120}"
    if kind == "add":
        path = draw(st.sampled_from(tables))
        key, value = draw(keys), draw(values)
        _at(document, path)[key] = value
        return f"add {list(path) + [key]} = {value!r:.120}"
    path = draw(st.sampled_from(paths))
    parent, last = _at(document, path[:-1]), path[-1]
    if kind == "delete":
        del parent[last]
        return f"delete {list(path)}"
    if kind == "rename" and isinstance(parent, dict):
        key = draw(keys)
        parent[key] = parent.pop(last)
        return f"rename {list(path)} to {key!r:.120}"
    value = draw(values)
    parent[last] = value
    return f"set {list(path)} = {value!r:.120}"


# --- cases ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConfigCase:
    """One fuzzed config: ``data`` written as the config file (``shape`` "file"), or no file at all
    ("missing"), or a directory where the file should be ("directory"); ``story`` says how it was made."""

    data: bytes
    story: tuple[str, ...]
    shape: str = "file"

    def __repr__(self) -> str:
        head = self.data[:160] + (b"..." if len(self.data) > 160 else b"")
        return f"ConfigCase(shape={self.shape!r}, story={list(self.story)!r}, data[:160]={head!r})"


@st.composite
def mutated_documents(draw) -> tuple[dict, tuple[str, ...]]:
    """The base document after one to four mutations, and what each did."""
    document = copy.deepcopy(BASE)
    return document, tuple(draw(mutation(document)) for _ in range(draw(st.integers(1, 4))))


def mutated_configs() -> st.SearchStrategy[ConfigCase]:
    return mutated_documents().map(lambda drawn: ConfigCase(toml_text(drawn[0]).encode(), drawn[1]))


def _garbled(text: bytes) -> st.SearchStrategy[tuple[bytes, str]]:
    cut = st.integers(0, len(text))
    return st.one_of(
        st.binary(max_size=600).map(lambda data: (data, "random bytes")),
        st.text(max_size=300).map(lambda data: (data.encode(), "random text")),
        cut.map(lambda at: (text[:at], f"the base file cut at byte {at}")),
        st.tuples(cut, st.binary(min_size=1, max_size=4)).map(
            lambda spec: (text[:spec[0]] + spec[1] + text[spec[0]:], f"{spec[1]!r} inserted at byte {spec[0]}")),
        st.just((b"\xef\xbb\xbf" + text, "a UTF-8 byte-order mark first")),
        st.just((text.decode().encode("utf-16"), "the base file in UTF-16")),
        st.just((b"\xff\xfe\x00garbage", "invalid UTF-8")),
        st.integers(1, 100_000).map(lambda depth: (b"a = " + b"[" * depth + b"]" * depth, f"an array {depth} deep")),
        st.integers(1, 100_000).map(lambda depth: (b"a = " + b"{b = " * depth + b"1" + b"}" * depth,
                                                   f"a table {depth} deep")),
        st.sampled_from((b"[[benchmark]]\nbatch_sizes = [1]\n", b"[[models]]\nsource = 'x'\n", b"[[datasets]]\n",
                         b"models = 3\n", b"[benchmark\n", b"a = \n", b"a = 1\na = 2\n", b"")).map(
            lambda data: (data, "a short TOML-like file")),
    )


@st.composite
def garbage_configs(draw) -> ConfigCase:
    data, story = draw(_garbled(BASE_TEXT))
    return ConfigCase(data, (story,))


config_cases = st.one_of(
    mutated_configs(), mutated_configs(), mutated_configs(), mutated_configs(), garbage_configs(),
    st.sampled_from((ConfigCase(b"", ("no file at all",), "missing"),
                     ConfigCase(b"", ("a directory in place of the file",), "directory"))),
)
"""Every kind of config case: four in six mutate the base document, one in six is garbage, one the file's
absence or a directory."""


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (4, 4), (255, 0, 0)).save(buffer, format="PNG")
    return buffer.getvalue()


WORKSPACE_FILES: dict[str, Callable[[], bytes]] = {
    "shapes.jsonl": lambda: b'{"id": "q0", "question": "Is it red?", "answer": "yes", "image": "images/red.png"}\n',
    "images/red.png": _png,
    "chat.jinja": lambda: b"{% for message in messages %}{{ message['content'] }}{% endfor %}",
}
"""What the base document's tables point at, relative to the config file's folder."""


def write_config_case(case: ConfigCase, folder: Path) -> Path:
    """Lay ``case`` out in ``folder`` (its config file and :data:`WORKSPACE_FILES`); the config file's path."""
    for name, content in WORKSPACE_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content())
    path = folder / CONFIG_NAME
    if case.shape == "file":
        path.write_bytes(case.data)
    elif case.shape == "directory":
        path.mkdir()
    return path


BASE = base_document()
BASE_TEXT = toml_text(BASE).encode()
