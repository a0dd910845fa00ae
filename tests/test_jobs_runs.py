"""Tests for smat.jobs.runs: loading a data source as the run configs describe it."""

import json

from smat.jobs.runs import DataConfig, load_examples


def test_imdb_line_breaks_become_spaces_only_when_asked(tmp_path):
    rows = [{"text": "Great film.<br /><br />Loved it.", "label": 1},
            {"text": "Dull<br /><br />and long.", "label": 0}]
    path = tmp_path / "reviews.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    kept = load_examples(DataConfig(source=str(path)))
    assert kept.texts == ("Great film.<br /><br />Loved it.", "Dull<br /><br />and long.")
    cleaned = load_examples(DataConfig(source=str(path), html_line_breaks_as_spaces=True))
    assert cleaned.texts == ("Great film. Loved it.", "Dull and long.")
    assert list(cleaned.labels) == list(kept.labels)


def test_static_teacher_explanations_are_cached_for_training_rows_only(tiny_teacher):
    """The explanation loss reads them on training rows; validation and test rows only
    need the teacher's logits, so no explainer runs over them."""
    from smat.jobs.runs import _cached_student_rows, protocol_data
    from smat.store import model_store

    trained = model_store.load(tiny_teacher / "model")
    data = DataConfig(**json.loads((tiny_teacher / "config.json").read_text())["data"])
    parts = protocol_data(data, load_examples(data), trained.tokenizer, num_examples=16)
    train, validation, test = _cached_student_rows(tiny_teacher, trained, parts,
                                                   setting="gradient", ig_steps=2,
                                                   num_examples=16)
    assert train.teacher_scores.shape == train.input_ids.shape
    assert validation.teacher_scores.shape == (len(validation.labels), 0)
    assert test.teacher_scores.shape == (len(test.labels), 0)
    assert validation.teacher_logits.shape[0] == len(validation.labels)
