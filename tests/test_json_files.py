"""Tests for smat.json_files.read_json: a broken file is named, with where it breaks."""

import json

import pytest

from smat.cli.failures import CommandEnded, reported_failures
from smat.explainers import AttentionExplainerConfig, init
from smat.json_files import read_json, recorded_dataclass
from smat.store.explainer_store import load_explainer, save_explainer


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


def test_recorded_dataclass_names_the_file_and_the_keys_that_do_not_fit():
    config = recorded_dataclass(AttentionExplainerConfig, {"num_layers": 2, "num_heads": 3},
                                source="run/config.json")
    assert (config.num_layers, config.num_heads) == (2, 3)
    with pytest.raises(ValueError, match=(r"^run/config.json records settings this version of "
                                          r"smat cannot read \(keys AttentionExplainerConfig "
                                          r"has no field for: \['bogus'\]\)")):
        recorded_dataclass(AttentionExplainerConfig,
                           {"num_layers": 2, "num_heads": 3, "bogus": 1},
                           source="run/config.json")
    with pytest.raises(ValueError, match=r"no value for \['num_heads'\]"):
        recorded_dataclass(AttentionExplainerConfig, {"num_layers": 2}, source="x")


def test_a_saved_explainer_from_another_version_is_named_in_one_line(tmp_path, capsys):
    config = AttentionExplainerConfig(num_layers=1, num_heads=2)
    save_explainer(tmp_path / "explainer", init(None, config), config)
    recorded = json.loads((tmp_path / "explainer" / "config.json").read_text())
    (tmp_path / "explainer" / "config.json").write_text(json.dumps({**recorded, "bogus": 1}))
    with pytest.raises(CommandEnded) as ended, reported_failures("smat x"):
        load_explainer(tmp_path / "explainer")
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.count("\n") == 1
    assert f"{tmp_path / 'explainer' / 'config.json'} records settings" in err and "'bogus'" in err
