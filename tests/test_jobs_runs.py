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
