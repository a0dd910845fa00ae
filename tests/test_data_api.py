"""The public API of smat.data: every exported name imports and is documented."""

import inspect

import smat.data


def test_every_public_name_is_exported_and_documented():
    assert len(smat.data.__all__) == len(set(smat.data.__all__))
    for name in smat.data.__all__:
        obj = getattr(smat.data, name)
        doc = inspect.getdoc(obj)
        assert doc and len(doc) > 20, f"smat.data.{name} lacks a docstring"

