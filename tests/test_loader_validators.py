"""Each validator, fed a malformed entry, reports the right file, line and column with a fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import GOOD_ENTRY, variant
from denpex_kb.loader import load_kb
from denpex_kb.validators import REGISTRY, run_checks


def problems_for(root: Path, name: str) -> list:
    return [p for p in run_checks(load_kb(root)) if p.path.endswith(name)]


CASES = [
    # (description, file name, text, code, line, col, words in the message)
    ("unknown field", "bad-field.yaml", variant(("id: demo-device-mismatch", "id: bad-field"), ("severity: high", "severity: high\nseverity_level: 3")), "DKB003", 8, 1, ["severity_level", "remove it"]),
    ("missing field", "bad-missing.yaml", variant(("id: demo-device-mismatch", "id: bad-missing"), ("phase: forward\n", "")), "DKB003", 1, 1, ["phase", "Field required"]),
    ("wrong enum", "bad-phase.yaml", variant(("id: demo-device-mismatch", "id: bad-phase"), ("phase: forward", "phase: fwd")), "DKB003", 5, 8, ["phase", "forward"]),
    ("duplicate key", "bad-dup.yaml", variant(("id: demo-device-mismatch", "id: bad-dup"), ("severity: high", "severity: high\nseverity: low")), "DKB002", 8, 1, ["duplicate key", "severity"]),
    ("tab indentation", "bad-tab.yaml", variant(("id: demo-device-mismatch", "id: bad-tab"), ("  - The first", "\t- The first")), "DKB001", 14, 1, ["tabs"]),
    ("file name differs from id", "other-name.yaml", variant(("id: demo-device-mismatch", "id: not-the-file-name")), "DKB004", 2, 5, ["rename the file"]),
    ("tag not in vocabulary", "bad-tag.yaml", variant(("id: demo-device-mismatch", "id: bad-tag"), ("tags: [pytorch, tensors, crash]", "tags: [pytorch, tensors, crashy]")), "DKB103", 6, 26, ["crashy", "kb/_tags.yaml"]),
    ("regex that RE2 rejects", "bad-regex.yaml", variant(("id: demo-device-mismatch", "id: bad-regex"), ('kind: literal\n    text: "Expected all tensors to be on the same device"', 'kind: regex\n    text: "Expected all (?=tensors) to be on"')), "DKB104", 12, 11, ["RE2"]),
    ("template with an unbalanced placeholder", "bad-template.yaml", variant(("id: demo-device-mismatch", "id: bad-template"), ('kind: literal\n    text: "Expected all tensors to be on the same device"', 'kind: template\n    text: "Expected all tensors to be on {num the same device"')), "DKB104", 12, 11, ["unbalanced", "{{"]),
    ("regex the browser matcher cannot translate", "inline-flag.yaml", variant(("id: demo-device-mismatch", "id: inline-flag"), ('kind: literal\n    text: "Expected all tensors to be on the same device"', 'kind: regex\n    text: "Expected all tensors to be on the same (?i:device)"')), "DKB104", 12, 11, ["browser matcher", "inline flag"]),
    ("signature anchored with ^", "caret.yaml", variant(("id: demo-device-mismatch", "id: caret"), ('kind: literal\n    text: "Expected all tensors to be on the same device"', 'kind: regex\n    text: "^Expected all tensors to be on the same device"')), "DKB104", 12, 11, ["whole of that line is written"]),
    ("signature without a usable anchor", "bad-anchor.yaml", variant(("id: demo-device-mismatch", "id: bad-anchor"), ('kind: literal\n    text: "Expected all tensors to be on the same device"', 'kind: regex\n    text: "\\\\d+ \\\\w+"')), "DKB104", 12, 11, ["anchor"]),
    ("related id that does not exist", "bad-related.yaml", variant(("id: demo-device-mismatch", "id: bad-related")) + "related:\n  - {id: no-such-entry, relation: sibling}\n", "DKB102", 33, 10, ["no-such-entry", "does not exist"]),
    ("command with a placeholder bash reads as a redirection", "bad-command.yaml", variant(("id: demo-device-mismatch", "id: bad-command")) + "commands:\n  - purpose: diagnose\n    description: The job's final state.\n    run: sacct -j <jobid> --format=JobID,State\n", "DKB111", 35, 19, ["'<jobid>'", "shell variable"]),
    ("since a version not yet made", "bad-since.yaml", variant(("id: demo-device-mismatch", "id: bad-since"), ("since: 0.1.0", "since: 9.0.0")), "DKB112", 9, 8, ["9.0.0", "newer"]),
    ("reference that is not http(s)", "bad-url.yaml", variant(("id: demo-device-mismatch", "id: bad-url")) + "references:\n  - {url: 'javascript:alert(1)', title: x}\n", "DKB003", 33, 11, ["http"]),
]


@pytest.mark.parametrize("description,name,text,code,line,col,words", CASES, ids=[c[0] for c in CASES])
def test_each_problem_has_file_line_col_and_fix(make_kb, description, name, text, code, line, col, words):
    root = make_kb({name: text})
    found = problems_for(root, name)
    assert found, f"{description}: nothing reported"
    problem = next((p for p in found if p.code == code), None)
    assert problem is not None, f"{description}: expected {code}, got {[p.render() for p in found]}"
    assert (problem.line, problem.col) == (line, col), problem.render()
    for word in words:
        assert word in problem.message, problem.render()
    assert problem.render().startswith(f"{problem.path}:{line}:{col}: error {code}")


def test_all_problems_of_a_run_are_collected(make_kb):
    bad_a = variant(("id: demo-device-mismatch", "id: bad-a"), ("phase: forward", "phase: nope"))
    bad_b = variant(("id: demo-device-mismatch", "id: bad-b"), ("severity: high", "severity: huge"))
    root = make_kb({"bad-a.yaml": bad_a, "bad-b.yaml": bad_b})
    problems = run_checks(load_kb(root))
    assert {p.path.rsplit("/", 1)[-1] for p in problems} == {"bad-a.yaml", "bad-b.yaml"}
    kb = load_kb(root)
    assert "demo-device-mismatch" in kb.entries  # the good entry still loads


def test_duplicate_ids_are_rejected(make_kb):
    root = make_kb({"zz-copy.yaml": GOOD_ENTRY})
    codes = {p.code for p in run_checks(load_kb(root))}
    assert "DKB101" in codes


def test_tombstone_must_point_at_an_existing_entry(make_kb):
    stone = "id: old-device-error\ntitle: Old device entry\nstatus: removed\nsince: 0.1.0\nreplaced_by: nowhere-entry\nreason: merged\n"
    root = make_kb({"old-device-error.yaml": "# yaml-language-server: $schema=../schema/entry.schema.json\n" + stone})
    problems = run_checks(load_kb(root))
    assert [p.code for p in problems] == ["DKB107"], [p.render() for p in problems]
    assert (problems[0].line, problems[0].col) == (6, 14)


def test_valid_tombstone_loads(make_kb):
    stone = "id: old-device-error\ntitle: Old device entry\nstatus: removed\nsince: 0.1.0\nreplaced_by: demo-device-mismatch\nreason: merged\n"
    root = make_kb({"old-device-error.yaml": "# yaml-language-server: $schema=../schema/entry.schema.json\n" + stone})
    kb = load_kb(root)
    assert run_checks(kb) == []
    assert kb.tombstones["old-device-error"].replaced_by == "demo-device-mismatch"


def test_every_registered_check_is_documented():
    from denpex_kb.validators import EntryCheck, KbCheck, iter_checks

    checks = list(iter_checks())
    # Every check module is imported and registers what it defines: a check dropped from registration (or a
    # module no longer imported by run_checks) would silently stop running.
    assert {c.name for c in checks} == EXPECTED_CHECKS
    codes = [c.code for c in checks]
    assert len(set(codes)) == len(codes), "two checks share a code"
    for check in checks:
        # run_checks only runs entry and knowledge-base checks; anything else would be registered but never run
        assert issubclass(check, (EntryCheck, KbCheck)), check
        assert check.name and check.code.startswith("DKB") and check.description


EXPECTED_CHECKS = {
    "file-name", "schema-comment", "tags", "signatures", "related-self", "placeholders", "response",
    "invisible-text", "provenance", "command-syntax", "since", "related", "replaced-by", "collateral-cycle",
}


def _command_problems(make_kb, run: str) -> list[str]:
    quoted = json.dumps(run)  # a JSON string is a YAML double-quoted scalar
    text = variant(("id: demo-device-mismatch", "id: with-command")) + (
        f"commands:\n  - purpose: diagnose\n    description: A command.\n    run: {quoted}\n"
    )
    root = make_kb({"with-command.yaml": text})
    return [p.message for p in problems_for(root, "with-command.yaml") if p.code == "DKB111"]


@pytest.mark.parametrize("run", [
    "ls /proc/<pid>/fd | wc -l",
    "docker run --rm <image> df -h /dev/shm",
    "torchrun <your usual arguments> 2>&1 | grep WARN",
    'echo "$A" <N>',
    "echo a#b <N>",  # a '#' inside a word starts no comment
    "echo 'a'#b <N>",  # nor right after a quote
])
def test_a_placeholder_outside_quotes_is_reported(make_kb, run):
    found = _command_problems(make_kb, run)
    assert len(found) == 1 and "redirection" in found[0], found


@pytest.mark.parametrize("run", [
    "python -c \"print('<repo-id>')\"",  # inside double quotes: a literal
    "grep -E '^\\[[0-9]+\\]<stderr>:' job.log",  # inside single quotes
    "sort < input.txt > sorted.txt 2>&1",  # real redirections, spaced
    "diff <(sort a) <(sort b)",  # process substitution
    "cat <<EOF\nx\nEOF",  # a heredoc
    "echo \\<N\\>",  # escaped: bash prints the angle brackets
    "mpirun -np 8 python train.py  # Open MPI's [1,N]<stderr>: prefix, that's all",  # a comment, quote and all
])
def test_quoted_or_real_redirections_are_not_placeholders(make_kb, run):
    assert _command_problems(make_kb, run) == []


def test_shell_blocks_in_the_prose_are_read_too(make_kb):
    body = (
        "  body: |\n    Drain the node:\n    ```bash\n    scontrol update nodename=<node> state=drain\n    ```\n"
        "    In Python the same text is no redirection:\n    ```python\n    print(<node>)\n    ```\n"
    )
    text = variant(("id: demo-device-mismatch", "id: with-block"), ("  body: Call `.to(device)` on each input tensor.\n", body))
    root = make_kb({"with-block.yaml": text})
    found = [p for p in problems_for(root, "with-block.yaml") if p.code == "DKB111"]
    assert [(p.line, p.col) for p in found] == [(24, 30)], [p.render() for p in found]
    assert "'<node>' in the shell block" in found[0].message


def test_an_unclosed_quote_is_reported(make_kb):
    found = _command_problems(make_kb, "grep -E 'NCCL WARN job.log")
    assert len(found) == 1 and "never closes" in found[0], found


def test_run_checks_runs_each_registered_check(make_kb, monkeypatch):
    from denpex_kb.validators import EntryCheck, iter_checks

    ran: list[str] = []
    for cls in list(iter_checks()):
        method = "check" if issubclass(cls, EntryCheck) else "check_kb"
        original = getattr(cls, method)

        def spy(self, *args, _original=original, _name=cls.name):
            ran.append(_name)
            return _original(self, *args)

        monkeypatch.setattr(cls, method, spy)
    assert run_checks(load_kb(make_kb())) == []
    assert set(ran) == set(REGISTRY) == EXPECTED_CHECKS
