import json

import numpy as np
import pytest

from smat.store.run_log import (
    MetricsWriter,
    cached_arrays,
    check_finite,
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
