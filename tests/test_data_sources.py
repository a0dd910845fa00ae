"""Tests for smat.data.sources: loading local csv / tsv / json / jsonl / parquet and Hub ids."""

import json

import numpy as np
import pytest

from smat.data.sources import load_dataset


def _write_csv(path, rows, header=("text", "label"), sep=","):
    lines = [sep.join(header)] + [sep.join(str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def csv_file(tmp_path):
    return _write_csv(tmp_path / "data.csv", [("good film", "pos"), ("NA", "neg"),
                                              ("bad film", "neg")])


def test_csv_with_string_labels(csv_file, tmp_path):
    data = load_dataset(csv_file, cache_dir=str(tmp_path / "cache"))
    assert data.texts == ("good film", "NA", "bad film")  # "NA" stays a text, not a NaN
    assert data.label_names == ("neg", "pos")
    np.testing.assert_array_equal(data.labels, [1, 0, 0])
    assert data.task == "classification" and data.text_pairs is None


def test_tsv_text_pair_regression(tmp_path):
    path = _write_csv(tmp_path / "qe.tsv", [("ein Haus", 'a "house"', "0.5"),
                                            ("Katze", "cat", "-1.25")],
                      header=("src", "mt", "z_mean"), sep="\t")
    data = load_dataset(str(path), text_column="src", text_pair_column="mt",
                        label_column="z_mean", task="regression",
                        cache_dir=str(tmp_path / "cache"))
    assert data.texts == ("ein Haus", "Katze")
    assert data.text_pairs == ('a "house"', "cat")
    np.testing.assert_allclose(data.labels, [0.5, -1.25])
    assert data.labels.dtype == np.float32 and data.num_labels == 1


@pytest.mark.parametrize("suffix", ["json", "jsonl", "parquet"])
def test_json_jsonl_parquet(tmp_path, suffix):
    rows = [{"sentence": "one", "y": 1}, {"sentence": "two", "y": 0}]
    path = tmp_path / f"d.{suffix}"
    if suffix == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)
    elif suffix == "json":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = load_dataset(path, text_column="sentence", label_column="y", num_labels=2,
                        cache_dir=str(tmp_path / "cache"))
    assert data.texts == ("one", "two")
    np.testing.assert_array_equal(data.labels, [1, 0])
    assert data.label_names == ("0", "1")


def test_several_files_are_one_split(tmp_path):
    a = _write_csv(tmp_path / "a.csv", [("x", 0)])
    b = _write_csv(tmp_path / "b.csv", [("y", 1)])
    data = load_dataset([a, b], cache_dir=str(tmp_path / "cache"))
    assert data.texts == ("x", "y")


@pytest.mark.parametrize("sep, suffix", [(",", ".csv"), ("\t", ".tsv")])
def test_files_with_different_headers_are_named_before_loading(tmp_path, sep, suffix):
    a = _write_csv(tmp_path / f"a{suffix}", [("x", 0)], sep=sep)
    b = _write_csv(tmp_path / f"b{suffix}", [("y", 1)], header=("text", "lab"), sep=sep)
    with pytest.raises(ValueError, match=(rf"data files '{a}' and '{b}' have different "
                                          r"columns \(\['text', 'label'\] and \['text', "
                                          r"'lab'\]\)")):
        load_dataset([a, b], cache_dir=str(tmp_path / "cache"))


def test_a_file_datasets_cannot_read_is_named_with_the_cause(tmp_path):
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("text,label\na,1\nb,0,extra,more\n", encoding="utf-8")
    with pytest.raises(ValueError, match=(rf"could not read the data file\(s\) \['{ragged}'\]: "
                                          r"ParserError: .*Expected 2 fields in line 3, saw 4")):
        load_dataset(ragged, cache_dir=str(tmp_path / "cache"))
    # json lines with other keys: no header to compare, the cause says it
    (tmp_path / "a.jsonl").write_text('{"text": "a", "label": 1}\n')
    (tmp_path / "b.jsonl").write_text('{"text": "b", "labels": 0}\n')
    with pytest.raises(ValueError, match=r"CastError: .*column names don't match"):
        load_dataset([tmp_path / "a.jsonl", tmp_path / "b.jsonl"],
                     cache_dir=str(tmp_path / "cache"))


def test_missing_text_column_lists_available(csv_file, tmp_path):
    with pytest.raises(ValueError, match=r"text_column='sentence'.*available columns: "
                                         r"\['text', 'label'\]"):
        load_dataset(csv_file, text_column="sentence", cache_dir=str(tmp_path / "cache"))


def test_missing_label_column_lists_available(csv_file, tmp_path):
    with pytest.raises(ValueError, match=r"label_column='rating'.*\['text', 'label'\]"):
        load_dataset(csv_file, label_column="rating", cache_dir=str(tmp_path / "cache"))


def test_missing_text_pair_column(csv_file, tmp_path):
    with pytest.raises(ValueError, match=r"text_pair_column='mt'"):
        load_dataset(csv_file, text_pair_column="mt", cache_dir=str(tmp_path / "cache"))


def test_empty_split_raises(tmp_path):
    path = _write_csv(tmp_path / "empty.csv", [])
    with pytest.raises(ValueError, match=r"split 'train' .* is empty"):
        load_dataset(path, cache_dir=str(tmp_path / "cache"))


def test_labels_outside_num_labels_raise(tmp_path):
    path = _write_csv(tmp_path / "d.csv", [("a", 0), ("b", 3), ("c", 1)])
    with pytest.raises(ValueError, match=r"labels \[3\] \(rows \[1\]\).*num_labels=2"):
        load_dataset(path, num_labels=2, cache_dir=str(tmp_path / "cache"))


def test_missing_text_raises(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"text": "a", "label": 0}\n{"text": null, "label": 1}\n')
    with pytest.raises(ValueError, match="row 1 is None"):
        load_dataset(path, cache_dir=str(tmp_path / "cache"))


def test_missing_and_unsupported_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        load_dataset(tmp_path / "nope.csv")
    bad = tmp_path / "d.xlsx"
    bad.write_text("x")
    with pytest.raises(ValueError, match="unsupported extension"):
        load_dataset(bad)
    with pytest.raises(ValueError, match="is a folder"):
        load_dataset(tmp_path)


def test_hub_id_offline_gives_a_clear_error(monkeypatch, tmp_path):
    import datasets
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConnectionError, match="smat-test/absent.*local csv"):
        load_dataset("smat-test/absent", cache_dir=str(tmp_path / "cache"))
