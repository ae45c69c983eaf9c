"""Image paths stay inside their dataset: the file's folder, or an ``image_roots`` folder the user allows.

Every dataset here lives in ``<tmp>/set``; ``<tmp>/outside`` holds a valid PNG that an escaping path
points at, so a row that reads it would be accepted: only the containment check rejects it."""

from __future__ import annotations

import pytest

from aerorl_ops.envs.image_paths import ImageFolder
from aerorl_ops.envs.items import ImageFileProblem
from aerorl_ops.envs.registry import make_env

LEAVES = "leaves the dataset folder"


@pytest.fixture
def folders(tiny_files):
    """The dataset folder's file maker (``tests/aerorl_ops/envs/conftest.TinyFiles``), and the PNG outside it."""
    outside = tiny_files.image("outside/secret.png", (0, 0, 255))
    dataset = type(tiny_files)(tiny_files.folder / "set")
    dataset.image("inside.png")
    return dataset, outside


def jsonl_reasons(dataset, image: str, **settings) -> tuple[list[str], list[str]]:
    """(accepted ids, rejection reasons) of a file with one good line and one naming ``image``."""
    path = dataset.jsonl("d.jsonl", [{"id": "good", "question": "Colour?", "answer": "red", "image": "inside.png"},
                                     {"id": "probe", "question": "Colour?", "answer": "blue", "image": image}])
    env = make_env("jsonl", path=str(path), **settings)
    return [item.item_id for item in env.items], [row.reason for row in env.rejected]


def test_a_relative_path_climbing_out_is_rejected(folders):
    dataset, outside = folders
    accepted, (reason,) = jsonl_reasons(dataset, "../outside/secret.png")
    assert accepted == ["good"]
    assert reason == (f"image path '../outside/secret.png' {LEAVES}: it resolves to {outside}, outside "
                      f"{dataset.folder}; move the image under the dataset's folder, or list its folder in the "
                      "dataset's image_roots setting")


def test_an_absolute_path_outside_is_rejected(folders):
    dataset, outside = folders
    accepted, (reason,) = jsonl_reasons(dataset, str(outside))
    assert accepted == ["good"] and reason.startswith(f"image path '{outside}' {LEAVES}: it resolves to {outside}")


def test_a_symlink_pointing_outside_is_rejected(folders):
    dataset, outside = folders
    (dataset.folder / "link.png").symlink_to(outside)
    (dataset.folder / "linked_dir").symlink_to(outside.parent, target_is_directory=True)
    for name in ("link.png", "linked_dir/secret.png"):
        accepted, (reason,) = jsonl_reasons(dataset, name)
        assert accepted == ["good"] and reason.startswith(f"image path '{name}' {LEAVES}: it resolves to {outside}")


def test_paths_inside_the_folder_are_read_however_written(folders):
    dataset, _ = folders
    dataset.image("sub/deep.png")
    (dataset.folder / "alias.png").symlink_to(dataset.folder / "inside.png")
    for name in (str(dataset.folder / "inside.png"), "sub/../inside.png", "sub/deep.png", "alias.png"):
        accepted, rejected = jsonl_reasons(dataset, name)
        assert (accepted, rejected) == (["good", "probe"], []), name


def test_an_allowed_root_admits_its_images_and_only_them(folders, tiny_files):
    dataset, outside = folders
    tiny_files.image("elsewhere/other.png")
    accepted, rejected = jsonl_reasons(dataset, "../outside/secret.png", image_roots=[str(outside.parent)])
    assert (accepted, rejected) == (["good", "probe"], [])
    accepted, (reason,) = jsonl_reasons(dataset, "../elsewhere/other.png", image_roots=[str(outside.parent)])
    assert accepted == ["good"] and f"outside {dataset.folder} or {outside.parent};" in reason


def test_a_parquet_row_naming_etc_passwd_is_rejected_for_its_path(folders):
    dataset, outside = folders
    depth = "../" * len(dataset.folder.parts)
    records = [dataset.verl_record(0, "<image>Colour?", "red", [{"bytes": None, "path": "inside.png"}]),
               dataset.verl_record(1, "<image>Colour?", "red", [{"bytes": None, "path": f"{depth}etc/passwd"}]),
               dataset.verl_record(2, "<image>Colour?", "blue", [{"bytes": None, "path": "../outside/secret.png"}])]
    path = dataset.verl_parquet("g.parquet", records)
    env = make_env("parquet", path=str(path))
    assert [item.item_id for item in env.items] == ["g-0"]
    assert [row.reason.split(":")[0] for row in env.rejected] == [
        f"image path '{depth}etc/passwd' {LEAVES}", f"image path '../outside/secret.png' {LEAVES}"]
    allowed = make_env("parquet", path=str(path), image_roots=[str(outside.parent)])
    assert [item.item_id for item in allowed.items] == ["g-0", "g-2"]


def test_the_check_happens_before_the_file_is_opened(tmp_path):
    folder = ImageFolder.of(tmp_path / "set")
    with pytest.raises(ImageFileProblem, match=LEAVES):
        folder.read("../no-such-file.png")  # outside and missing: the path is refused, never looked up
    with pytest.raises(ImageFileProblem, match="image file not found"):
        folder.read("no-such-file.png")
