"""Class-data-sharing archives do not pile up: a new one is kept with the most recently
used others of its kind, and what makers that died left is removed."""

from __future__ import annotations

import os
from pathlib import Path

from onceflow.cds_archive import KEEP, make_once, prune, used


def archive(folder: Path, name: str, age_s: float) -> Path:
    path = folder / name
    path.write_bytes(b"classes")
    then = path.stat().st_mtime - age_s
    os.utime(path, (then, then))
    return path


def test_a_new_archive_keeps_the_most_recently_used_others_of_its_kind(tmp_path: Path) -> None:
    old = [archive(tmp_path, f"spark-driver-{n:016x}.jsa", 1000 + n) for n in range(5)]
    used(old[4])  # the oldest, but a JVM started with it just now
    kafka = archive(tmp_path, "kafka-0123456789abcdef.jsa", 5000)
    left = archive(tmp_path, "spark-driver-00000000000000ff.partial-4242", 10)

    def record(partial: Path, scratch: Path) -> None:
        assert scratch.is_dir()
        partial.write_bytes(b"new classes")

    new = tmp_path / "spark-driver-ffffffffffffffff.jsa"
    assert make_once(new, record, "test-cds-") == new

    spark = sorted(path.name for path in tmp_path.glob("spark-driver-*.jsa"))
    assert spark == sorted([new.name, old[4].name, old[0].name][:KEEP])
    assert kafka.exists(), "another kind's archive is not this one's to remove"
    assert not left.exists()


def test_an_existing_archive_is_not_made_again_and_nothing_is_removed(tmp_path: Path) -> None:
    paths = [archive(tmp_path, f"kafka-{n:016x}.jsa", n) for n in range(KEEP + 2)]

    def record(partial: Path, scratch: Path) -> None:
        raise AssertionError("made again")

    assert make_once(paths[-1], record, "test-cds-") == paths[-1]
    assert all(path.exists() for path in paths)


def test_a_maker_that_made_nothing_removes_nothing(tmp_path: Path) -> None:
    paths = [archive(tmp_path, f"kafka-{n:016x}.jsa", n) for n in range(KEEP + 2)]
    assert make_once(tmp_path / "kafka-ffffffffffffffff.jsa", lambda p, s: None, "t-") is None
    assert all(path.exists() for path in paths)


def test_prune_keeps_what_it_is_told_to(tmp_path: Path) -> None:
    paths = [archive(tmp_path, f"kafka-{n:016x}.jsa", 100 + n) for n in range(4)]
    removed = prune(paths[0], keep=2)
    assert sorted(removed) == sorted(paths[2:])
    assert paths[0].exists() and paths[1].exists()


def made_from(path: Path, *sources: Path) -> Path:
    (path.parent / (path.name + ".from")).write_text("".join(f"{s}\n" for s in sources))
    return path


def test_archives_of_removed_installations_go_first_and_do_not_push_out_one_in_use(
    tmp_path: Path,
) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    venvs = [tmp_path / f"venv{n}" / "jars" for n in range(KEEP + 1)]
    for folder in venvs[:2]:
        folder.mkdir(parents=True)
    # venv0's archive is the least recently used; venv2 and venv3 were removed since,
    # their archives used more recently than venv0's (fresh clones' runs).
    in_use = made_from(archive(cache, "spark-driver-0000000000000000.jsa", 3000), venvs[0])
    removed_venvs = [
        made_from(archive(cache, f"spark-driver-000000000000000{n}.jsa", 100 * n), venvs[n])
        for n in (2, 3)
    ]
    older = archive(cache, "spark-driver-00000000000000aa.jsa", 5000)  # no .from: kept

    def record(partial: Path, scratch: Path) -> None:
        partial.write_bytes(b"new classes")

    new = cache / "spark-driver-ffffffffffffffff.jsa"
    assert make_once(new, record, "test-cds-", made_from=(venvs[1],)) == new

    assert (cache / (new.name + ".from")).read_text() == f"{venvs[1]}\n"
    assert in_use.exists(), "the archive of an installation still there was pushed out"
    assert (cache / (in_use.name + ".from")).exists()
    assert not any(path.exists() for path in removed_venvs)
    assert not any((cache / (p.name + ".from")).exists() for p in removed_venvs)
    assert sorted(p.name for p in cache.glob("spark-driver-*.jsa")) == sorted(
        [new.name, in_use.name, older.name][:KEEP]
    )


def test_prune_removes_the_from_files_of_archives_removed_by_hand(tmp_path: Path) -> None:
    kept = archive(tmp_path, "kafka-0000000000000000.jsa", 0)
    gone = tmp_path / "kafka-0000000000000001.jsa.from"
    gone.write_text(f"{tmp_path}\n")
    mine = made_from(kept, tmp_path)
    assert prune(mine) == []
    assert not gone.exists()
    assert (tmp_path / (kept.name + ".from")).exists()
