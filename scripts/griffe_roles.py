"""A griffe extension that renders the reST roles of smat's docstrings on the docs site.

smat's docstrings are Google style with reST roles, which read well in ``help()`` and
editors: ``:func:`name``` (and ``:class:``, ``:meth:``, ``:data:``, ``:attr:``, ``:mod:``,
``:exc:``) for cross-references, ``:math:`...``` and ``.. math::`` blocks for equations.
mkdocstrings renders Markdown, where those roles would show as raw text; this extension
(mkdocs.yml: the python handler's ``extensions``) rewrites each docstring when the site is
built: a cross-reference becomes a link to the object's entry (plain code when the site has
no entry for it), math becomes MathJax input (pymdownx.arithmatex).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import griffe

ROLES = ("func", "class", "meth", "data", "attr", "mod", "exc", "obj")
_REFERENCE = re.compile(r":(?:py:)?(" + "|".join(ROLES) + r"):`([^`]+)`")
_MATH = re.compile(r":math:`([^`]+)`")
_MATH_BLOCK = re.compile(r"^(?P<indent>[ \t]*)\.\. math::(?P<first>.*)\n"
                         r"(?P<body>(?:(?:(?P=indent)[ \t]+\S.*)?\n)*)", re.MULTILINE)
RAW_ROLE = re.compile(r":(?:py:)?(?:" + "|".join((*ROLES, "math")) + r"):`|\.\. math::")
"""What a rendered page must not show: a role or directive left as it was written."""


def markdown_of(docstring: str, resolve: Callable[[str], str]) -> str:
    """`docstring` with its roles written for mkdocstrings: references as optional autorefs
    to ``resolve(name)`` (the text shown is the name, its last part for ``~name``), inline
    math as ``\\( ... \\)`` and ``.. math::`` blocks as ``$$ ... $$``."""

    def block(match: re.Match) -> str:
        indent = match["indent"]
        lines = [line.strip() for line in [match["first"], *match["body"].splitlines()]
                 if line.strip()]
        return (f"{indent}$$\n" + "".join(f"{indent}{line}\n" for line in lines)
                + f"{indent}$$\n\n")

    def reference(match: re.Match) -> str:
        target = match[2].strip()
        shown = target.removeprefix("~")
        if target.startswith("~"):
            shown = shown.rsplit(".", 1)[-1]
        return (f'<autoref identifier="{resolve(target.lstrip("~."))}" optional>'
                f"<code>{shown}</code></autoref>")

    text = _MATH_BLOCK.sub(block, docstring)
    text = _MATH.sub(lambda match: "\\( " + match[1] + " \\)", text)
    return _REFERENCE.sub(reference, text)


def resolver(obj: Any, collection: Any) -> Callable[[str], str]:
    """Resolve a reference written in `obj`'s docstring to an object path: as written, or
    relative to `obj`, its class or its module; as written when none is found."""

    def resolve(name: str) -> str:
        scopes = [obj, obj.parent, obj.module] if obj.parent is not None else [obj]
        for candidate in [name, *(f"{scope.path}.{name}" for scope in scopes
                                  if scope is not None)]:
            try:
                return collection[candidate].path
            except (KeyError, ValueError, AttributeError, griffe.AliasResolutionError,
                    griffe.CyclicAliasError):
                continue
        return name

    return resolve


class SphinxRoles(griffe.Extension):
    """Rewrite every docstring's roles (:func:`markdown_of`) once the object tree is built."""

    def on_object(self, *, obj: Any, loader: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown_of(obj.docstring.value,
                                              resolver(obj, loader.modules_collection))

    def on_package(self, *, pkg: Any, loader: Any, **kwargs: Any) -> None:
        self.on_object(obj=pkg, loader=loader)  # a package is not one of its own members
