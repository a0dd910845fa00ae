"""Tests for smat.json_files.read_json: a broken file is named, with where it breaks."""

import pytest

from smat.json_files import read_json


def test_read_json_returns_the_value(tmp_path):
    (tmp_path / "config.json").write_text('{"seeds": [0, 1], "name": "caf\\u00e9"}')
    assert read_json(tmp_path / "config.json") == {"seeds": [0, 1], "name": "café"}


def test_a_file_cut_off_mid_write_is_named_with_line_and_column(tmp_path):
    path = tmp_path / "result.json"
    path.write_text('{\n  "accuracy": ')
    with pytest.raises(ValueError, match=(rf"^{path} is not valid JSON: Expecting value at "
                                          r"line 2, column 15$")):
        read_json(path)


def test_a_binary_file_is_named(tmp_path):
    path = tmp_path / "model.json"
    path.write_bytes(b"\x89PNG\r\n")
    with pytest.raises(ValueError, match=rf"^{path} is not a UTF-8 text file \(byte 0\)"):
        read_json(path)


def test_a_missing_file_stays_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "none.json")
