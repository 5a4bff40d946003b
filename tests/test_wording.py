"""The diagnosis's wording catalogue: both languages, the same placeholders, no dead entry.

The rules are read as source (``ast``): every key they name exists, and every entry is
named by some rule, the headline or the myths.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from string import Formatter

import pytest

from nsysan.diagnose import wording
from nsysan.diagnose.gpu_facts import MEASURED_HOST_CAUSES
from nsysan.diagnose.wording import WORDING, join, nothing, say, say_n

DIAGNOSE = Path(wording.__file__).parent
CATALOGUE_MODULES = {"wording.py", "resource_wording.py"}
FORMS = (".one", ".many")


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in Formatter().parse(text) if name is not None}


def _sources() -> dict[str, ast.Module]:
    return {
        path.name: ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(DIAGNOSE.glob("*.py"))
        if path.name not in CATALOGUE_MODULES
    }


def _named_keys() -> tuple[set[str], list[re.Pattern[str]]]:
    """Every string literal of the diagnose modules, and every f-string as a pattern
    (a formatted value stands for one key segment: ``f"host-cause.{c}.advice"``)."""
    literals: set[str] = set()
    patterns: list[re.Pattern[str]] = []
    for tree in _sources().values():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                literals.add(node.value)
            elif isinstance(node, ast.JoinedStr):
                parts = [
                    re.escape(v.value) if isinstance(v, ast.Constant) else r"[^.]+"
                    for v in node.values
                ]
                patterns.append(re.compile("".join(parts)))
    return literals, patterns


def _key_arguments() -> list[tuple[str, str, str]]:
    """(module, function, key) for every literal key passed to say, say_n or join."""
    position = {"say": 0, "say_n": 1, "join": 0}
    out = []
    for module, tree in _sources().items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            index = position.get(node.func.id)
            if index is None or len(node.args) <= index:
                continue
            arg = node.args[index]
            branches = [arg.body, arg.orelse] if isinstance(arg, ast.IfExp) else [arg]
            for b in branches:
                if isinstance(b, ast.Constant) and isinstance(b.value, str):
                    out.append((module, node.func.id, b.value))
    return out


@pytest.mark.parametrize("key", sorted(WORDING))
def test_every_entry_has_both_languages_with_the_same_placeholders(key: str) -> None:
    entry = WORDING[key]
    assert isinstance(entry, tuple) and len(entry) == 2, key
    en, zh = entry
    assert isinstance(en, str) and en.strip(), f"{key}: no English"
    assert isinstance(zh, str) and zh.strip(), f"{key}: no Chinese"
    assert _fields(en) == _fields(zh), f"{key}: {_fields(en)} in English, {_fields(zh)} in Chinese"
    assert all(name.isidentifier() for name in _fields(en)), f"{key}: a positional placeholder"


def test_number_forms_come_in_pairs() -> None:
    for key in WORDING:
        for form, other in (FORMS, FORMS[::-1]):
            if key.endswith(form):
                assert key[: -len(form)] + other in WORDING, f"{key} has no {other} form"


def test_every_key_a_rule_names_exists() -> None:
    named = _key_arguments()
    assert len(named) > 100  # the scan sees the rules' calls
    for module, function, key in named:
        keys = [key + form for form in FORMS] if function == "say_n" else [key]
        for k in keys:
            assert k in WORDING, f"{module}: {function}({key!r}) names no entry"


def test_every_entry_is_used() -> None:
    literals, patterns = _named_keys()
    dead = []
    for key in WORDING:
        base = next((key[: -len(f)] for f in FORMS if key.endswith(f)), key)
        if key in literals or base in literals or any(p.fullmatch(key) for p in patterns):
            continue
        dead.append(key)
    assert not dead, f"entries no rule uses: {dead}"


def test_each_measured_host_cause_has_a_name_and_advice() -> None:
    # host-bound-gaps names its causes by id (f"host-cause.{c}"): the catalogue has
    # exactly the causes it can name.
    named = {k.split(".")[1] for k in WORDING if re.fullmatch(r"host-cause\.[a-z_]+\.advice", k)}
    assert named == set(MEASURED_HOST_CAUSES)
    for cause in MEASURED_HOST_CAUSES:
        assert f"host-cause.{cause}" in WORDING


def test_say_fills_each_language() -> None:
    assert say("against-others", shares="5.3%", where="GPU 0") == {
        "en": ", against 5.3% on GPU 0",
        "zh": "，而 GPU 0 仅 5.3%",
    }
    # A value given per language fills each language with its own text.
    idle = say_n(2, "dominant-gap.idle", where="GPU 0–3")
    assert idle == {"en": "GPU 0–3 each sit", "zh": "GPU 0–3"}
    assert say_n(1, "dominant-gap.idle", where="GPU 1")["en"] == "GPU 1 sits"
    kernels = join("sep.list", [say("compute-skew.other-kernels"), {"en": "a", "zh": "a"}])
    assert kernels == {"en": "(other kernels), a", "zh": "（其他内核），a"}
    assert say("comm-bound.collective", collective="{AllReduce}")["en"] == " (mostly {AllReduce})"
    assert nothing() == {"en": "", "zh": ""}
