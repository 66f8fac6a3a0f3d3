"""Profiles: every shipped one is valid and says where its numbers come from; bad ones are
rejected with one line per problem, naming file, line and key."""

import json
import re
import time

import pytest

from gpuaccept.cli import profile_json_schema
from gpuaccept.errors import ProfileError, ProfileNotFound
from gpuaccept.profile import ProfileCatalog, check_base_profile, load_profile
from gpuaccept.resources import shipped_dir
from tests.helpers import alias_bomb, probe_replay, write

PROFILES = shipped_dir("profiles")
SHIPPED = sorted(PROFILES.glob("*.yaml"))
BASES = sorted((PROFILES / "bases").glob("*.yaml"))
# keys that describe the profile rather than the machine: no provenance needed
DESCRIPTIVE = {"schema", "name", "description", "extends", "match"}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_profile_loads(path):
    profile = load_profile(path, [PROFILES])
    assert profile.name == path.stem
    assert profile.spec.match is not None, "every shipped profile can be picked by --profile auto"
    assert len(profile.sha256) == 64


@pytest.mark.parametrize("path", BASES, ids=[p.stem for p in BASES])
def test_shipped_base_is_a_valid_partial_profile(path):
    check_base_profile(path, [PROFILES])


def _leaves(data, path=()):
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, path + (key,))
    else:
        yield path


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_expectation_says_where_it_came_from(path):
    profile = load_profile(path, [PROFILES])
    data = profile.spec.model_dump(by_alias=True, exclude_none=True, exclude_unset=True)
    missing = []
    for leaf in _leaves(data):
        if leaf[0] in DESCRIPTIVE:
            continue
        dotted = [".".join(leaf[:n]) for n in range(len(leaf), 0, -1)]
        if not any(profile.where(key) for key in dotted):
            missing.append(".".join(leaf))
    assert not missing, f"{path.name}: no provenance comment for {missing}"


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_multi_gpu_profile_checks_ddp_scaling_at_each_world_size_it_trains(path):
    from gpuaccept.vocabulary.steps import parse_ddp_case

    profile = load_profile(path, [PROFILES])
    ddp = profile.spec.ddp
    if profile.gpu_count < 2:
        assert ddp is None, "scaling needs two GPUs"
        return
    assert ddp is not None, f"{path.name}: no ddp section"
    checked = {parse_ddp_case(case)[0] for case in ddp.min_efficiency}
    assert checked == set(ddp.world_sizes) - {1}, f"{path.name}: world sizes trained but not checked"


def test_no_two_shipped_profiles_claim_the_same_machine():
    profiles = ProfileCatalog.with_shipped().load_all()
    claims = {}
    for profile in profiles:
        for model in profile.spec.match.gpu_model:
            key = (model, profile.spec.match.gpu_count)
            assert key not in claims, f"{profile.name} and {claims[key]} both match {key}"
            claims[key] = profile.name


def test_published_json_schema_is_current():
    published = json.loads((PROFILES / "profile.schema.json").read_text())
    assert published == profile_json_schema(), "run: gpu-accept profile schema > profiles/profile.schema.json"


def test_shipped_profiles_satisfy_the_published_json_schema():
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    schema = json.loads((PROFILES / "profile.schema.json").read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    validator.check_schema(schema)  # once: jsonschema.validate() would check the schema again for each profile
    for path in SHIPPED:
        profile = load_profile(path, [PROFILES])
        document = profile.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
        error = jsonschema.exceptions.best_match(validator.iter_errors(document))
        assert error is None, error
        assert yaml.safe_load(path.read_text())  # and they are plain YAML to other tools


def test_extends_merges_mappings_and_null_removes(tmp_path):
    write(tmp_path / "bases" / "b.yaml", """
        schema: 1
        gpus: {model: "X*", memory_min_gib: 10, ecc: enabled}
        links: {all: NV4}
    """)
    child = write(tmp_path / "c.yaml", """
        schema: 1
        extends: bases/b
        gpus: {count: 2, memory_min_gib: 20}
        links: null
    """)
    profile = load_profile(child)
    assert profile.spec.gpus.memory_min_gib == 20
    assert profile.spec.gpus.ecc == "enabled"
    assert profile.spec.gpus.count == 2
    assert profile.spec.links is None


def test_pasted_matrix_and_pair_rules_give_the_expected_link_of_each_pair():
    pairs = ProfileCatalog.with_shipped().load("rtx3090-4-nvlink-pairs")
    assert pairs.expected_link(0, 1) == "NV4" and pairs.expected_link(1, 2) == "SYS"
    server = ProfileCatalog.with_shipped().load("rtx4090-4-pcie")
    assert server.expected_link(1, 0) == "NODE" and server.expected_link(0, 3) == "SYS"


def test_auto_selection_picks_by_model_and_count_and_lists_candidates_when_none_fits():
    catalog = ProfileCatalog.with_shipped()
    assert catalog.auto_select("NVIDIA H200", 4).profile.name == "h200-4-nvswitch"
    assert catalog.auto_select("NVIDIA H200", 2).profile.name == "h200-2-nvswitch"
    with pytest.raises(ProfileNotFound, match=r"no profile matches this machine \(3x NVIDIA B200\).*h200-4-nvswitch \(4x NVIDIA H200\)"):
        catalog.auto_select("NVIDIA B200", 3)


def test_a_server_that_lost_a_gpu_is_judged_against_the_profile_of_the_machine_it_must_be():
    # 3 H200s joined through NVSwitch are no partition of an HGX board: the machine must have 4
    from tests.test_catalogue import recorded, with_answer

    facts = probe_replay(recorded("h200x4", lambda answers: with_answer(answers, "device_count", 3)))
    chosen = ProfileCatalog.with_shipped().select(facts)
    assert chosen.profile.name == "h200-4-nvswitch"
    assert "its match rule fits this machine (4x NVIDIA H200, 1 missing (1 of the NVSwitch partition's 4 GPUs not seen)" in chosen.reason
    assert "3 GPU(s) joined through NVSwitch: a partition of 4" in chosen.reason


def test_auto_selection_prefers_the_users_folder_and_says_so(tmp_path):
    mine = """
        schema: 1
        match: {gpu_model: "NVIDIA H200", gpu_count: 4}
        gpus: {count: 4, model: "NVIDIA H200"}
    """
    write(tmp_path / "mine.yaml", mine)
    chosen = ProfileCatalog.with_shipped([tmp_path]).auto_select("NVIDIA H200", 4)
    assert chosen.profile.name == "mine" and "chosen over h200-4-nvswitch (" in chosen.reason


def test_auto_selection_refuses_to_choose_between_two_matches_of_one_folder(tmp_path):
    mine = """
        schema: 1
        match: {gpu_model: "NVIDIA H200", gpu_count: 4}
        gpus: {count: 4, model: "NVIDIA H200"}
    """
    write(tmp_path / "mine.yaml", mine)
    write(tmp_path / "theirs.yaml", mine)
    catalog = ProfileCatalog.with_shipped([tmp_path])
    with pytest.raises(ProfileNotFound, match=r"several profiles match .*mine \(.*theirs \("):
        catalog.auto_select("NVIDIA H200", 4)


def test_unknown_profile_name_lists_the_known_ones():
    with pytest.raises(ProfileNotFound, match="no profile named 'h300'; known profiles: a100-8-nvswitch, "):
        ProfileCatalog.with_shipped().resolve("h300")


# ---- malformed profiles: each gives its own one-line error ----------------------------------

MINIMAL = 'schema: 1\ngpus:\n  count: 4\n  model: "NVIDIA H200"\n'

MALFORMED = {
    "unknown-top-key": (MINIMAL + "gpuz: 1\n", 5, "gpuz", "unknown key (did you mean 'gpus'?)"),
    "unknown-nested-key": (MINIMAL + "  memory_gib: 140\n", 5, "gpus.memory_gib", "did you mean 'memory_min_gib'?"),
    "duplicate-key": (MINIMAL + "  count: 8\n", 5, "gpus.count", "duplicate key (first given on line 3)"),
    "text-for-number": ('schema: 1\ngpus:\n  count: four\n  model: "X"\n', 3, "gpus.count", "valid integer"),
    "bool-for-number": ('schema: 1\ngpus:\n  count: true\n  model: "X"\n', 3, "gpus.count", "valid integer"),
    "zero-gpus": ('schema: 1\ngpus:\n  count: 0\n  model: "X"\n', 3, "gpus.count", "greater than or equal to 1"),
    "odd-pcie-width": (MINIMAL + "pcie:\n  width: 12\n", 6, "pcie.width", "Input should be 1, 2, 4, 8, 16 or 32"),
    "pcie-generation-9": (MINIMAL + "pcie:\n  generation: 9\n", 6, "pcie.generation", "less than or equal to 7"),
    "yaml-on-is-a-bool": (MINIMAL + "  ecc: on\n", 5, "gpus.ecc", "'enabled' or 'disabled'"),
    "bad-link-type": (MINIMAL + "links:\n  all: NV\n", 6, "links.all", "should match pattern"),
    "bad-pair-key": (MINIMAL + "links:\n  pairs:\n    0-1: NV4\n", 7, "links.pairs.0-1", "a GPU pair is written gpuN-gpuM"),
    # gpu01 would name no test: its rule would judge nothing, and a failing machine would pass
    "leading-zero-pair-key": (
        MINIMAL + "links:\n  pairs:\n    gpu00-gpu01: NV4\n", 7, "links.pairs.gpu00-gpu01", "a GPU pair is written gpuN-gpuM"
    ),
    "leading-zero-gpu-key": (
        MINIMAL + "nvlink:\n  active_links: 18\n  active_links_per_gpu:\n    gpu01: 3\n",
        8,
        "nvlink.active_links_per_gpu.gpu01",
        "a GPU is written gpuN",
    ),
    "no-ddp-world-size": (
        MINIMAL + "ddp:\n  model: tiny\n  world_sizes: []\n  batches: [8]\n", 7, "ddp.world_sizes", "at least 1 item"
    ),
    "pair-out-of-range": (
        MINIMAL + "links:\n  pairs:\n    gpu7-gpu0: NV4\n", 7, "links.pairs.gpu7-gpu0", "gpu7 is out of range: the profile has 4 GPU(s)"
    ),
    "matrix-wrong-size": (
        MINIMAL + "links:\n  matrix: |\n    GPU0 GPU1\n    GPU0 X NV4\n    GPU1 NV4 X\n", 6, "links.matrix",
        "the matrix has 2 GPUs but gpus.count is 4",
    ),
    "matrix-asymmetric": (
        'schema: 1\ngpus:\n  count: 2\n  model: "X"\nlinks:\n  matrix: |\n    GPU0 GPU1\n    GPU0 X NV4\n    GPU1 SYS X\n',
        6,
        "links.matrix",
        "GPU1 to GPU0 reads SYS but GPU0 to GPU1 reads NV4",
    ),
    "missing-base": ("schema: 1\nextends: bases/nothing\n" + MINIMAL[10:], 2, "extends", "base profile 'bases/nothing' not found"),
    "missing-required": ('schema: 1\ngpus:\n  model: "X"\n', 2, "gpus.count", "required key is missing"),
    "yaml-syntax": (MINIMAL + "links: {all: NV4\n", 6, "", "invalid YAML"),
    "unknown-schema": (MINIMAL.replace("schema: 1", "schema: 2"), 1, "schema", "schema 2 is not known to this release"),
    "unquoted-version": (MINIMAL + "software:\n  driver_min: 570.10\n", 6, "software.driver_min", "quote version numbers ('570.1')"),
    "match-contradicts-count": (MINIMAL + "match:\n  gpu_model: X\n  gpu_count: 8\n", 7, "match.gpu_count", "8 contradicts gpus.count 4"),
    "empty-file": ("", 1, "", "the file is empty"),
    "list-at-top": ("- gpus\n", 1, "", "expected a mapping of profile keys"),
    "negative-memory": (MINIMAL + "  memory_min_gib: -1\n", 5, "gpus.memory_min_gib", "greater than 0"),
    "inactive-link-gpu-out-of-range": (
        MINIMAL + "nvlink:\n  active_links: 18\n  inactive_by_design:\n    gpu9: [1]\n",
        8,
        "nvlink.inactive_by_design.gpu9",
        "gpu9 is out of range",
    ),
    "p2p-pair-with-itself": (MINIMAL + "p2p:\n  pairs:\n    gpu1-gpu1: {read: true}\n", 7, "p2p.pairs.gpu1-gpu1", "not paired with itself"),
    "size-in-gb": (
        MINIMAL + "nccl:\n  busbw:\n    all_reduce:\n      1GB: 300\n",
        8,
        "nccl.busbw.all_reduce.1GB",
        "'1GB' is not a size: write it with a binary unit, e.g. 256MiB, 1GiB",
    ),
    "pairwise-size-in-gi": (
        MINIMAL + "pairwise:\n  size: 1Gi\n  concurrent: true\n  min_busbw: 300\n",
        6,
        "pairwise.size",
        "'1Gi' is not a size: write it with a binary unit",
    ),
    "copies-size-in-mb": (MINIMAL + "copies:\n  size: 512MB\n", 6, "copies.size", "'512MB' is not a size"),
    "size-of-no-bytes": (MINIMAL + "copies:\n  size: 0GiB\n", 6, "copies.size", "'0GiB' is no bytes at all"),
    "infinite-floor": (MINIMAL + "copies:\n  p2p_min: .inf\n", 6, "copies.p2p_min", "Input should be a finite number (got inf)"),
    "nan-floor": (
        MINIMAL + "pairwise:\n  concurrent: true\n  min_busbw: .nan\n", 7, "pairwise.min_busbw", "Input should be a finite number (got nan)"
    ),
    "infinite-memory": (MINIMAL + "  memory_min_gib: .inf\n", 5, "gpus.memory_min_gib", "finite number"),
    "integer-too-long-to-read": (
        MINIMAL + "  memory_min_gib: " + "9" * 5000 + "\n", 5, "gpus.memory_min_gib", "not a value this tool reads: Exceeds the limit"
    ),
    "hex-integer-too-long-to-show": (
        MINIMAL + "  memory_min_gib: 0x" + "f" * 5000 + "\n", 5, "gpus.memory_min_gib", "(got an integer of 20000 bits)"
    ),
    "exponent-yaml-reads-as-text": (
        MINIMAL + "copies:\n  p2p_min: 3.125e2\n", 6, "copies.p2p_min", "(got '3.125e2'): YAML reads 3.125e2 as text, write it as 3.125e+2"
    ),
    "terminal-escape-codes": (
        MINIMAL + "links:\n  matrix: |\n    \x1b[1m        GPU0    GPU1\x1b[0m\n    \x1b[1mGPU0\x1b[0m     X      NV4\n",
        7,
        "links.matrix",
        "a terminal escape code (ESC, as in colour codes copied from a terminal) is not allowed: "
        "strip the colour codes, or paste plain text",
    ),
    "control-character": (MINIMAL + "description: ding\x07\n", 5, "", "invalid YAML: character 0x07 is not allowed"),
    "alias-loop": (MINIMAL + "x-list: &a [1, *a]\n", 5, "", "an alias refers to a value that contains it"),
    "nested-too-deep": (MINIMAL + "x: " + "[" * 5000 + "]" * 5000 + "\n", 5, "", "nested more than 100 levels deep"),
    "host-copy-larger-than-the-buffers": (
        MINIMAL + "copies:\n  size: 256MiB\n  host_size: 1GiB\n  host_to_device_min: 40\n",
        5,
        "copies",
        "host_size 1GiB is larger than size 256MiB",
    ),
    "efficiency-above-1": (
        MINIMAL + "ddp:\n  model: tiny\n  world_sizes: [1, 2]\n  batches: [8]\n  min_efficiency:\n    2gpu-bs8: 1.5\n",
        10,
        "ddp.min_efficiency.2gpu-bs8",
        "less than or equal to 1 (got 1.5)",
    ),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_malformed_profile_gives_one_located_line(tmp_path, name):
    text, line, key, message = MALFORMED[name]
    path = write(tmp_path / f"{name}.yaml", text) if text else tmp_path / f"{name}.yaml"
    if not text:
        path.write_text("")
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    lines = str(caught.value).splitlines()
    assert len(lines) == 1, lines
    expected = f"{path}:{line}: " + (f"{key}: " if key else "")
    assert lines[0].startswith(expected), lines[0]
    assert message in lines[0], lines[0]


def test_circular_extends_is_named(tmp_path):
    write(tmp_path / "a.yaml", "schema: 1\nextends: b\n")
    write(tmp_path / "b.yaml", "schema: 1\nextends: a\n")
    with pytest.raises(ProfileError, match=r"b.yaml:2: extends: circular extends: .*a.yaml -> .*b.yaml -> .*a.yaml"):
        load_profile(tmp_path / "a.yaml")


def test_every_problem_is_reported_at_once(tmp_path):
    path = write(tmp_path / "many.yaml", """
        schema: 1
        gpus:
          count: many
          model: "X"
          colour: green
        pcie:
          width: 3
    """)
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    lines = str(caught.value).splitlines()
    assert [re.match(r".*:(\d+): ([\w.]+):", line).groups() for line in lines] == [
        ("3", "gpus.count"),
        ("5", "gpus.colour"),
        ("7", "pcie.width"),
    ]


def test_an_error_in_a_base_names_the_base_file_and_its_line(tmp_path):
    write(tmp_path / "bases" / "b.yaml", "schema: 1\ngpus:\n  model: X\n  ecc: maybe\n")
    child = write(tmp_path / "c.yaml", "schema: 1\nextends: bases/b\ngpus:\n  count: 2\n")
    with pytest.raises(ProfileError, match=r"bases/b.yaml:4: gpus.ecc: "):
        load_profile(child)


@pytest.mark.parametrize("merge_keys", [False, True], ids=["aliases", "merge-keys"])
def test_a_billion_laughs_is_refused_at_once(tmp_path, merge_keys):
    path = tmp_path / "laughs.yaml"
    path.write_text(alias_bomb(merge_keys))
    start = time.monotonic()
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    # it expanded for minutes, until killed for memory: any margin a loaded machine keeps tells the two apart
    assert time.monotonic() - start < 20
    lines = str(caught.value).splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{path}: its aliases (*name) and merge keys (<<) expand to "), lines
    assert lines[0].endswith("values, more than 100,000: too large to be a profile")


def test_aliases_that_nest_deeper_than_any_profile_are_refused(tmp_path):
    path = tmp_path / "chain.yaml"
    path.write_text(MINIMAL + "x-0: &a0 [1]\n" + "".join(f"x-{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 400)))
    with pytest.raises(ProfileError) as caught:
        load_profile(path)
    assert str(caught.value) == f"{path}: its aliases (*name) nest values more than 100 levels deep: too deep to be a profile"


def test_a_file_too_large_to_be_a_profile_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text(MINIMAL + "# padding\n" * 10000)
    with pytest.raises(ProfileError, match=rf"^{re.escape(str(path))}: larger than 64 KiB: too large to be a profile$"):
        load_profile(path)


def test_profile_show_keeps_commented_out_keys_where_they_stood_not_on_the_next_key(tmp_path, capsys):
    from gpuaccept.cli import main

    path = tmp_path / "commented.yaml"
    path.write_text(
        "# a site's profile\n"
        "schema: 1\n"
        "extends: h200-4-nvswitch\n"
        "nvlink:\n"
        "  active_links: 18\n"
        "  # inactive_by_design: {gpu3: [16, 17]}   # links down on purpose\n"
        "  # the count every GPU shows\n"
        "  version: '4.0'\n"
        "burnin:\n"
        "  # min_power_share: 0.9       # median power share\n"
        "  max_slowdown_share: 0.01     # test_clock_slowdown's limit\n"
        "  # min_sm_clock_mhz: 1340     # the floor under load\n"
        "health:\n"
        "  retired_pages_max: 40\n"
    )
    profile = load_profile(path, [PROFILES])
    # a key's note is its own comment and the remarks just above it; a key commented out is no note
    assert profile.provenance["burnin.max_slowdown_share"] == "test_clock_slowdown's limit"
    assert profile.provenance["nvlink.version"] == "the count every GPU shows"
    assert main(["profile", "show", str(path)]) == 0
    shown = capsys.readouterr().out.splitlines()
    at = shown.index("  # min_power_share: 0.9       # median power share")
    assert shown[at + 1] == "  max_slowdown_share: 0.01  # test_clock_slowdown's limit"
    assert shown[shown.index("  # inactive_by_design: {gpu3: [16, 17]}   # links down on purpose") + 1] == \
        "  version: '4.0'  # the count every GPU shows"
    # a line commented out at the end of a section stays in that section, not on the next one's key
    ends = shown.index("  # min_sm_clock_mhz: 1340     # the floor under load")
    assert shown[ends + 1] == "health:" and "min_sm_clock" not in profile.provenance.get("health", "")


def test_a_line_commented_out_stays_a_comment_whatever_it_holds():
    from gpuaccept.profile.render import render_yaml

    # a vertical tab splits a Python line: shown as it is, the rest would be a key of the YAML written
    text = render_yaml({"burnin": {"round_s": 30}}, {"burnin.round_s.#before": "# old: 1\x0bduration: 1s"})
    assert text == "burnin:\n  # old: 1\\x0bduration: 1s\n  round_s: 30\n"
