"""The docs keep up with the code: CLI reference, rule ids and thresholds, error slugs."""

from __future__ import annotations

import os
import re

import click
from conftest import REPO

from nsysan import errors
from nsysan.cli import cli
from nsysan.diagnose import (
    balance_rules,
    cpu_rules,
    gpu_rules,
    hardware_rules,
    host_rules,
    launch_rules,
    load_rules,
    memory_rules,
    myths,
    nccl_rules,
    rules,
    stagger_rules,
    transfer_rules,
)
from nsysan.diagnose.facts import Facts

DOCS = REPO / "docs"


def render_cli_reference() -> str:
    """docs/cli.md as generated from the click commands."""
    out = [
        "# Command line",
        "",
        "Generated from the commands' help texts; `NSYSAN_UPDATE_DOCS=1 pytest tests/test_docs.py` rewrites it.",
        "",
    ]
    root = click.Context(
        cli, info_name="nsysan", terminal_width=100, help_option_names=["-h", "--help"]
    )
    out += ["```", cli.get_help(root), "```", ""]
    for name in sorted(cli.commands):
        cmd = cli.commands[name]
        ctx = click.Context(
            cmd, info_name=name, parent=root, terminal_width=100, help_option_names=["-h", "--help"]
        )
        out += [f"## nsysan {name}", "", "```", cmd.get_help(ctx), "```", ""]
    return "\n".join(out)


def test_cli_reference_is_current() -> None:
    path = DOCS / "cli.md"
    expected = render_cli_reference()
    if os.environ.get("NSYSAN_UPDATE_DOCS"):
        path.write_text(expected, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == expected, (
        "run NSYSAN_UPDATE_DOCS=1 pytest tests/test_docs.py"
    )


def test_every_rule_id_and_threshold_is_documented() -> None:
    text = (DOCS / "findings.md").read_text(encoding="utf-8")
    for rule_id in rules.RULE_IDS:
        assert f"### {rule_id}" in text, rule_id
    for module in (
        rules,
        stagger_rules,
        balance_rules,
        nccl_rules,
        hardware_rules,
        gpu_rules,
        host_rules,
        transfer_rules,
        launch_rules,
        cpu_rules,
        memory_rules,
        load_rules,
        myths,
    ):
        for name in dir(module):
            if re.fullmatch(r"[A-Z][A-Z_]+", name) and name not in {
                "RULES",
                "RULE_IDS",
                "MYTHS",
                "LAUNCH_RULES",
                "LAUNCH_RULE_IDS",
                "SOURCE",
                "CPU_RULES",
                "CPU_RULE_IDS",
                "CAPTURE",
                "MEMORY_RULES",
                "MEMORY_RULE_IDS",
                "LOAD_RULES",
                "LOAD_RULE_IDS",
            }:
                assert f"`{name}`" in text, f"{module.__name__}.{name} is not in docs/findings.md"
    for check in myths.MYTHS:
        myth_id = check(Facts(gpu_count=0), ()).myth_id  # type: ignore[attr-defined]
        assert f"`{myth_id}`" in text


def test_every_error_slug_has_a_section() -> None:
    text = (DOCS / "errors.md").read_text(encoding="utf-8")
    for obj in vars(errors).values():
        if (
            isinstance(obj, type)
            and issubclass(obj, errors.NsysanError)
            and obj is not errors.NsysanError
        ):
            assert f"## {obj.slug}" in text, obj.slug


def test_metric_pages_are_linked() -> None:
    index = (DOCS / "metrics.md").read_text(encoding="utf-8")
    for page in sorted((DOCS / "metrics").glob("*.md")):
        assert f"metrics/{page.name}" in index, page.name
