"""Images through the same teacher and student commands as texts: a small ViT trained from
scratch (`--from-scratch`: its folder holds only a config.json) on an `.npz` of images
whose class is decided by one bright corner patch, then students with no explainer, a
static patch explainer and SMaT; a SMaT student killed mid-run resumes to the same
parameters, and the learned explainer explains the images with `smat explain`."""

import json

import jax
import numpy as np
import pytest

import smat.training.scaffold
from smat.cli import main
from smat.data.protocol import DataConfig, load_examples
from smat.jobs.student_run import run_student
from smat.store import checkpoint
from smat.training.loop import LoopConfig
from smat.training.student import StudentTrainConfig
from tests.helpers import interrupted_then_resumed

TEACHER = ["--pooling", "cls", "--learning-rate", "3e-3", "--warmup-steps", "10",
           "--batch-size", "16", "--max-epochs", "20", "--patience", "20",
           "--student-validation-size", "24", "--student-test-size", "40", "--no-progress"]


def _corner_images(path, rows=240, seed=0):
    """16 x 16 images of noise with a bright top-left (class "tl") or bottom-right ("br")
    4 x 4 patch: the label sits in one patch of the ViT's 4 x 4 grid."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, rows)
    images = rng.uniform(0, 0.3, (rows, 16, 16, 3))
    for image, label in zip(images, labels, strict=True):
        corner = (slice(0, 4), slice(0, 4)) if label else (slice(12, 16), slice(12, 16))
        image[corner] += 0.7
    np.savez(path, images=(images * 255).astype(np.uint8), labels=labels,
             label_names=np.array(["br", "tl"]))
    return path


@pytest.fixture(scope="module")
def image_teacher(tmp_path_factory):
    root = tmp_path_factory.mktemp("images")
    encoder = root / "vit"
    encoder.mkdir()
    (encoder / "config.json").write_text(json.dumps({
        "model_type": "vit", "image_size": 16, "patch_size": 4, "hidden_size": 32,
        "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 37}))
    data = _corner_images(root / "corners.npz")
    teacher = root / "teacher"
    assert main(["train-teacher", "--source", str(data), "--encoder", str(encoder),
                 "--from-scratch", *TEACHER, "--output-dir", str(teacher)]) == 0
    return teacher


def test_vit_teacher_from_scratch_learns_the_images(image_teacher):
    result = json.loads((image_teacher / "result.json").read_text())
    assert result["sizes"] == {"teacher_train": 108, "teacher_validation": 12, "test": 40}
    assert result["test"]["accuracy"] >= 0.9  # one bright patch decides the class
    model = json.loads((image_teacher / "model" / "model.json").read_text())
    assert model["encoder"] == "vit" and model["label_names"] == ["br", "tl"]
    assert model["image_mean"] == pytest.approx([0.485, 0.456, 0.406])
    recorded = json.loads((image_teacher / "config.json").read_text())
    assert recorded["from_scratch"] is True and recorded["data"]["modality"] == "auto"


def test_students_of_each_setting_train_on_patch_tokens(image_teacher, capsys):
    records = {}
    for setting in ("none", "gradient", "attention_all", "smat"):
        assert main(["train-student", "--teacher", str(image_teacher), "--explainer", setting,
                     "--size", "32", "--seeds", "2", "--parallel-seeds", "--max-epochs", "2",
                     "--batch-size", "8", "--inner-learning-rate", "0.05",
                     "--no-progress"]) == 0
        records[setting] = json.loads(capsys.readouterr().out)
    for setting, seeds in records.items():
        assert [r["explainer"] for r in seeds] == [setting] * 2
        assert all(0 <= r["test"]["accuracy"] <= 1 and r["steps"] == 8 for r in seeds)
    # the SMaT teacher explainer: one coefficient per teacher head (2 layers x 4 heads)
    # that moved from uniform, saved where `smat explain` reads it
    run = image_teacher / "students" / "n32" / "smat" / "seed0"
    weights = np.asarray(json.loads((run / "result.json").read_text())["head_weights"])
    assert weights.shape == (2, 4) and not np.allclose(weights, 1 / 8)
    explainer = run / "explainer"
    data = json.loads((image_teacher / "model" / "model.json").read_text())["data"]["source"]
    out = image_teacher.parent / "explained"
    assert main(["explain", data, "--model", str(image_teacher / "model"), "--explainers",
                 "attention_all", str(explainer), "--no-progress", "--output-dir",
                 str(out)]) == 0
    scores = json.loads((out / "explanations.json").read_text())[0]["scores"]
    assert [len(v) for v in scores.values()] == [16, 16]


def test_smat_student_on_images_resumes_to_identical_parameters(image_teacher, tmp_path,
                                                                  monkeypatch):
    config = StudentTrainConfig(explainer="smat", inner_learning_rate=0.05, loop=LoopConfig(
        batch_size=8, max_epochs=2, patience=5, evals_per_epoch=2))

    def run(folder):
        run_student(image_teacher, config=config, num_examples=32, output_dir=folder,
                    progress=False, keep_checkpoints=True)
        return checkpoint.restore(folder / "checkpoints" / "last")[0]  # the loop's state

    reference = run(tmp_path / "a")
    # killed after the evaluation at step 2 (evals every 2 steps)
    resumed = interrupted_then_resumed(monkeypatch, smat.training.scaffold,
                                       "scaffold_seed_step", on_call=4,
                                       run=lambda: run(tmp_path / "b"))
    for a, b in zip(jax.tree.leaves(reference), jax.tree.leaves(resumed), strict=True):
        np.testing.assert_array_equal(a, b)
    assert (json.loads((tmp_path / "a" / "result.json").read_text())["test"]
            == json.loads((tmp_path / "b" / "result.json").read_text())["test"])


def test_image_sources_are_detected_and_text_runs_record_what_they_did(tmp_path):
    data = _corner_images(tmp_path / "c.npz", rows=4)
    assert DataConfig(source=str(data)).is_image
    assert not DataConfig(source=str(data), modality="text").is_image
    assert not DataConfig().is_image
    # a text run's record lacks the image settings at their defaults: the folders (and the
    # hashes students keep of their teacher) of runs made before images stay valid
    assert "modality" not in DataConfig().settings()
    assert DataConfig(source=str(data)).settings()["modality"] == "auto"
    with pytest.raises(ValueError, match="images come from one source"):
        DataConfig(source=str(data), student_source=("a.npz", "b.npz"))


def test_an_image_student_source_follows_the_teachers_images(tmp_path):
    # the paper's layout (CIFAR-100: teacher on train, students tested on test)
    train, test = (_corner_images(tmp_path / f"{n}.npz", rows=r, seed=s)
                   for n, r, s in (("train", 6, 0), ("test", 4, 1)))
    dataset = load_examples(DataConfig(source=str(train), student_source=(str(test),)))
    assert (len(dataset), dataset.student_rows) == (10, 4)
    np.testing.assert_array_equal(dataset.images[6:], load_examples(
        DataConfig(source=str(test))).images)
    np.savez(tmp_path / "other.npz", images=np.zeros((2, 8, 8, 3), np.uint8),
             labels=np.array([0, 1]), label_names=np.array(["br", "tl"]))
    with pytest.raises(ValueError, match="8x8 images"):
        load_examples(DataConfig(source=str(train), student_source=(str(tmp_path / "other.npz"),)))


def test_text_encoder_on_images_is_refused_by_name(image_teacher, tiny_checkpoint, tmp_path,
                                                   capsys):
    data = json.loads((image_teacher / "model" / "model.json").read_text())["data"]["source"]
    out = tmp_path / "t"
    assert main(["train-teacher", "--source", data, "--encoder", str(tiny_checkpoint),
                 *TEACHER, "--output-dir", str(out)]) == 2
    error = capsys.readouterr().err
    assert "holds images" in error and "a text encoder" in error and "Traceback" not in error


def test_a_model_smat_trained_is_a_start_its_encoder_under_a_fresh_head(image_teacher):
    # the digits experiment's students start from a pretext model's encoder this way
    from smat.jobs.teacher_run import start_model
    from smat.models import ModelSource, functional
    from smat.store import model_store

    folder = image_teacher / "model"
    trained = functional.split(model_store.load(folder).model)[1]
    models = [start_model(ModelSource(encoder=str(folder), pooling="cls"),
                          task="classification", num_labels=3, seed=seed)[0]
              for seed in (0, 1)]
    for model in models:
        started = functional.split(model)[1]
        for a, b in zip(jax.tree.leaves(started["encoder"]), jax.tree.leaves(trained["encoder"]),
                        strict=True):
            np.testing.assert_array_equal(a, b)
        assert model.classifier.kernel[...].shape == (32, 3)  # the new task's head
    assert not np.array_equal(models[0].classifier.kernel[...], models[1].classifier.kernel[...])
    with pytest.raises(ValueError, match="--from-scratch draws new weights"):
        start_model(ModelSource(encoder=str(folder), from_scratch=True),
                    task="classification", num_labels=3, seed=0)
