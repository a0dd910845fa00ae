"""Tests for smat.explain: explanations by name over a tokenized data set."""

import numpy as np

from smat.explain import explain_encoded
from smat.models import functional
from tests.helpers import synthetic_encoded, tiny_classifier


def test_scores_do_not_depend_on_the_batch_size():
    graphdef, params = functional.split(tiny_classifier(seed=4))
    data = synthetic_encoded(19, seed=5)
    names = ["random", "gradient", "attention_all"]
    by_size = [explain_encoded(graphdef, params, data, names, task="classification",
                               batch_size=size) for size in (4, 7, 32)]
    (scores, predictions), others = by_size[0], by_size[1:]
    for other_scores, other_predictions in others:
        np.testing.assert_array_equal(other_predictions, predictions)
        np.testing.assert_array_equal(other_scores["random"], scores["random"])
        for name in ("gradient", "attention_all"):
            np.testing.assert_allclose(other_scores[name], scores[name], rtol=1e-5, atol=1e-7)
    real = data.attention_mask == 1
    assert np.all(scores["random"][~real] == 0) and len(np.unique(scores["random"][real])) > 100
    assert not np.array_equal(scores["random"][0], scores["random"][1])
