"""The size flags shared by the benches: each flag's default is its full size, `--quick` a small one."""

from __future__ import annotations

import argparse
from typing import Any


def _shown(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int | float) else str(value)


def parser(
    description: str, full: dict[str, Any], quick: dict[str, Any], flags: dict[str, tuple[type, str]], quick_help: str
) -> argparse.ArgumentParser:
    """A bench's parser with `--quick` and its size flags."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=quick_help)
    add_size_flags(p, full, quick, flags)
    return p


def add_size_flags(
    p: argparse.ArgumentParser, full: dict[str, Any], quick: dict[str, Any], flags: dict[str, tuple[type, str]]
) -> None:
    """One flag per `flags` entry ("--name": (type, help)), whose help names its two sizes."""
    for flag, (kind, text) in flags.items():
        key = flag.lstrip("-").replace("-", "_")
        p.add_argument(
            flag, type=kind, default=None, help=f"{text} (default {_shown(full[key])}; --quick {_shown(quick[key])})"
        )


def fill_sizes(args: argparse.Namespace, full: dict[str, Any], quick: dict[str, Any]) -> None:
    """The sizes not given on the command line: the quick ones with --quick, else the full ones."""
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
