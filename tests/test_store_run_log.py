import json

import numpy as np
import pytest

from smat.data.protocol import file_fingerprint
from smat.store.run_log import (
    MetricsWriter,
    cached_arrays,
    check_finite,
    check_run_settings,
    mean_metrics,
    settings_hash,
    write_json_atomic,
)


def test_check_finite_names_metric_and_steps():
    check_finite([{"loss": 1.0}], first_step=1, last_step=1)
    with pytest.raises(RuntimeError, match=r"Non-finite loss between steps 5 and 9"):
        check_finite([{"loss": 1.0, "kl": 0.0}, {"loss": np.nan, "kl": 0.0}],
                     first_step=5, last_step=9)


def test_mean_metrics():
    assert mean_metrics([{"a": 1.0}, {"a": 3.0}]) == {"a": 2.0}
    assert mean_metrics([]) == {}


def test_metrics_writer_resume_drops_redone_steps(tmp_path):
    path = tmp_path / "m.jsonl"
    writer = MetricsWriter(path)
    for step in (1, 2, 3):
        writer.write({"step": step, "loss": float(step)})
    MetricsWriter(path, resume_step=2).write({"step": 3, "loss": 9.0})
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["step"], r["loss"]) for r in rows] == [(1, 1.0), (2, 2.0), (3, 9.0)]


def test_write_json_atomic(tmp_path):
    write_json_atomic(tmp_path / "a" / "x.json", {"b": 1})
    assert json.loads((tmp_path / "a" / "x.json").read_text()) == {"b": 1}
    assert not list((tmp_path / "a").glob("*.tmp"))


def test_cached_arrays_computes_once_and_never_leaves_a_partial_file(tmp_path):
    path = tmp_path / "cache" / "scores.npz"
    calls = []

    def compute():
        calls.append(1)
        return {"a": np.arange(3), "b": np.ones((2, 2), np.float32)}

    first = cached_arrays(path, compute)
    again = cached_arrays(path, compute)
    assert len(calls) == 1 and sorted(again) == ["a", "b"]
    np.testing.assert_array_equal(again["b"], first["b"])

    def dies():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached_arrays(tmp_path / "other.npz", dies)
    assert not list(tmp_path.glob("other*"))


def test_settings_hash_ignores_key_order_and_sees_values():
    assert settings_hash({"a": 1, "b": [2, 3]}) == settings_hash({"b": [2, 3], "a": 1})
    assert settings_hash({"a": 1}) != settings_hash({"a": 2})
    assert len(settings_hash({})) == 12


def test_a_run_folder_is_never_reused_for_other_settings(tmp_path):
    folder = tmp_path / "run"
    settings = {"train": {"learning_rate": 1e-4, "loop": {"seed": 0}}, "pooling": "cls"}
    assert check_run_settings(folder, settings) is False  # nothing there yet
    folder.mkdir()
    write_json_atomic(folder / "config.json", settings)
    (folder / "result.json").write_text("{}")
    assert check_run_settings(folder, json.loads(json.dumps(settings))) is True
    changed = {"train": {"learning_rate": 3e-4, "loop": {"seed": 0}}, "pooling": "cls"}
    with pytest.raises(ValueError, match=r"train\.learning_rate: 0\.0001 -> 0\.0003.*--overwrite"):
        check_run_settings(folder, changed)
    assert (folder / "result.json").is_file()  # refused: the old run is untouched
    assert check_run_settings(folder, changed, overwrite=True) is False
    assert not folder.exists()  # replaced: the caller starts afresh
    folder.mkdir()
    write_json_atomic(folder / "config.json", settings)
    # the same settings with --overwrite (e.g. a damaged checkpoint): also afresh
    assert check_run_settings(folder, settings, overwrite=True) is False
    assert not folder.exists()


def test_settings_an_older_run_did_not_record_complete_its_config(tmp_path):
    write_json_atomic(tmp_path / "config.json", {"pooling": "cls"})
    assert check_run_settings(tmp_path, {"pooling": "cls", "data_fingerprint": "ab12"}) is True
    assert json.loads((tmp_path / "config.json").read_text())["data_fingerprint"] == "ab12"
    with pytest.raises(ValueError, match="pooling: 'cls' -> 'mean'"):
        check_run_settings(tmp_path, {"pooling": "mean", "data_fingerprint": "ab12"})


def test_file_fingerprint_follows_content_not_name(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.write_text("text,label\ngood,1\n")
    b.write_text("text,label\ngood,1\n")
    assert file_fingerprint([a]) == file_fingerprint([b])
    b.write_text("text,label\ngood,0\n")
    assert file_fingerprint([a]) != file_fingerprint([b])
