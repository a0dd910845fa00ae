"""Command-line flags from config dataclasses: each field one flag, typed, defaulted and
documented from its class (the docstring's Attributes are the ``--help`` text), and the
config built back from the parsed flags. No command declares a flag by hand.

A field's ``metadata`` may add:
  choices / names: the allowed values (``names()`` is listed in the help);
  parse: a function from the typed string to the value;
  shown: the default as the help prints it;
  positional: a positional argument instead of a ``--flag``;
  nargs / metavar: as argparse's (a fixed count, a list per use);
  append: the flag may be given several times, each use a list of values;
  doc: the help text, for a field shared by several configs (else the docstring's);
  old_flags: earlier spellings, accepted for one release with a warning (CHANGELOG);
  renamed_to: the field is itself an old flag, kept for one release with a warning that
    names this replacement;
  skip: on a field holding a config, the inner fields (at any depth) that get no flag;
  base: on a field holding a config, a function from the values built so far to the config
    whose values its flags change (its flags then default to that config's, "the preset's").
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import types
import typing
from typing import Any


def field_docs(cls: type) -> dict[str, str]:
    """Field name -> its one-paragraph description from the class docstring's Attributes."""
    docs, name = {}, None
    lines = (cls.__doc__ or "").split("Attributes:", 1)[-1].splitlines()
    for line in lines:
        match = re.match(r"^ {6}(\w+): (.*)$", line)
        if match:
            name = match.group(1)
            docs[name] = match.group(2).strip()
        elif name and line.startswith(" " * 8) and line.strip():
            docs[name] += " " + line.strip()
        elif line.strip() == "" and docs:
            name = None
    return docs


def nested_config(hint: Any) -> type | None:
    """The config dataclass a field holds (e.g. ``loop: LoopConfig``), else None."""
    return hint if dataclasses.is_dataclass(hint) and isinstance(hint, type) else None


def as_typed(value: Any) -> str:
    """A default as a user types it on the command line: a sequence as its values separated
    by spaces (not a Python tuple)."""
    if isinstance(value, tuple | list):
        return " ".join(str(item) for item in value)
    return str(value)


def flag_name(field_name: str) -> str:
    return "--" + field_name.replace("_", "-")


class RenamedFlag(argparse.Action):
    """A flag's old spelling, accepted for one release with a warning that names the new
    one; it stores into the new flag's destination."""

    def __init__(self, option_strings: list[str], dest: str, *, new: str, **kwargs: Any):
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {option_string} is now {self.new}; the old spelling "
              "goes in the next release", file=sys.stderr)
        setattr(namespace, self.dest, values)


def add_config_flags(parser: argparse.ArgumentParser, cls: type, *, defaults: Any = None,
                     skip: typing.Collection[str] = (), relative: bool = False,
                     prefix: str | None = None, container: Any = None) -> None:
    """One flag per field of a config dataclass, nested configs included.

    A field holding another config (``loop: LoopConfig``) adds that config's flags in a
    group of their own, without a prefix. A bool field becomes a switch, a ``tuple[X, ...]``
    field takes one or more values, and the metadata keys of the module docstring refine
    the rest. A field without a description in the class docstring's Attributes is an
    error: document it there.

    Args:
      defaults: an instance whose values are the flags' defaults (default: the fields').
      skip: field names of this config and the configs it holds that get no flag.
      relative: flags default to None, meaning "the base config's value" (see `base`).
      prefix: the destination prefix (default: the class name).
      container: where the flags go (an argument group of `parser`; default `parser`).

    Raises:
      TypeError: a field without a description.
    """
    container = container or parser
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    prefix = prefix or cls.__name__
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        doc = field.metadata.get("doc") or docs.get(field.name)
        if doc is None:
            raise TypeError(f"{cls.__name__}.{field.name} has no description in the class "
                            "docstring's Attributes section (the --help text comes from it)")
        default = getattr(defaults, field.name) if defaults is not None else field.default
        dest = f"{prefix}.{field.name}"
        meta = field.metadata
        nested = nested_config(hints[field.name])
        if nested is not None:
            # groups hang off the parser: argparse deprecates groups inside groups
            group = parser.add_argument_group(f"{field.name} settings", doc)
            inner_relative = relative or "base" in meta
            inner = None if inner_relative or default is dataclasses.MISSING else default
            add_config_flags(parser, nested, defaults=inner,
                             skip={*skip, *meta.get("skip", ())},
                             relative=inner_relative, prefix=dest, container=group)
            continue
        _add_field_flag(container, field, hints[field.name], doc, default,
                        dest=dest, relative=relative)


def _add_field_flag(container: Any, field: dataclasses.Field, hint: Any, doc: str,
                    default: Any, *, dest: str, relative: bool) -> None:
    meta = field.metadata
    required = default is dataclasses.MISSING and not relative
    shown = "the preset's" if relative else meta.get("shown", as_typed(default))
    is_switch = hint is bool
    help_text = (doc + (f": {meta['names']()}" if "names" in meta else "")
                 + (" (required)" if required else "" if is_switch else f" (default: {shown})"))
    options: dict[str, Any] = {"help": help_text.replace("%", "%%")}
    if meta.get("positional"):
        container.add_argument(dest, metavar=field.name, **options)
        return
    options["dest"] = dest
    options["default"] = None if relative or required else default
    flag = flag_name(field.name)
    if "renamed_to" in meta:  # an old flag with a meaning of its own, kept for one release
        container.add_argument(flag, action=RenamedFlag, new=meta["renamed_to"],
                               metavar=meta.get("metavar"), **options)
        return
    # a required field with old spellings cannot be required by argparse (the old flag may
    # set it): build_config reports it missing instead
    if required and not meta.get("old_flags"):
        options["required"] = True
    if is_switch:
        container.add_argument(flag, action="store_const", const=True, **options)
        return
    if "parse" in meta:
        options["type"] = meta["parse"]
    else:
        # `float | None` -> float, `tuple[str, ...]` -> str with one or more values.
        kind = hint
        if isinstance(kind, types.UnionType):
            kind = next(t for t in typing.get_args(kind) if t is not type(None))
        while typing.get_origin(kind) is tuple:
            kind, options["nargs"] = typing.get_args(kind)[0], "+"
        options["type"] = kind
    if "nargs" in meta:
        options["nargs"] = meta["nargs"]
    if meta.get("append"):
        options["action"] = "append"
    if "choices" in meta:
        options["choices"] = meta["choices"]
    options["metavar"] = meta.get("metavar", None if "choices" in meta else field.name.upper())
    if options["metavar"] is None:
        del options["metavar"]
    container.add_argument(flag, **options)
    for old in meta.get("old_flags", ()):
        container.add_argument(old, action=RenamedFlag, new=flag, dest=dest,
                               default=argparse.SUPPRESS, help=f"the old spelling of {flag}",
                               **{k: options[k] for k in ("type", "choices", "nargs",
                                                          "metavar") if k in options})


def build_config(cls: type, args: argparse.Namespace, *, base: Any = None,
                 prefix: str | None = None) -> Any:
    """The config of the parsed flags: `base` (default: the class defaults) with every flag
    that has a value (not None) replaced; a field whose metadata has ``base`` starts from
    the config that function returns for the values built before it.

    Raises:
      ValueError: a required flag without a value, or as the config's own checks.
    """
    prefix = prefix or cls.__name__
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        dest = f"{prefix}.{field.name}"
        nested = nested_config(hints[field.name])
        if nested is not None:
            if "base" in field.metadata:
                inner = field.metadata["base"](values)
            else:
                inner = getattr(base, field.name) if base is not None else field.default
            values[field.name] = build_config(
                nested, args, prefix=dest,
                base=None if inner is dataclasses.MISSING else inner)
            continue
        value = getattr(args, dest, None)
        if value is not None:
            values[field.name] = _frozen(value)
        elif field.default is dataclasses.MISSING and base is None:
            raise ValueError(f"{flag_name(field.name)} is required")
    return dataclasses.replace(base, **values) if base is not None else cls(**values)


def _frozen(value: Any) -> Any:
    """Parsed lists as the tuples config fields hold (nested for appended lists)."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def in_flags(message: str, flags: typing.Collection[str]) -> str:
    """An error message with each config field it names (``ExplainConfig.batch_size``)
    written as the command's flag (``--batch-size``) where the command has that flag."""

    def flag(match: re.Match) -> str:
        name = flag_name(match.group(1))
        return name if name in flags else match.group(0)

    return re.sub(r"\b[A-Z]\w*Config\.(\w+)", flag, message)
