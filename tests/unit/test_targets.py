"""The target registry and contract: entry points, lazy references, every role a target declares
(knobs that really are keys of its configs, validation sets, report roles, demo stages), and the
commands that iterate them."""

from __future__ import annotations

import math
import pickle
import subprocess
import sys

import pytest
import yaml

from coaccel import simulation
from coaccel.cli import main
from coaccel.spine.config import override
from coaccel.spine.errors import CoaccelError
from coaccel.spine.target import Ref, SimTarget
from coaccel.validate.targets import Target, Validation

KINDS = simulation.kinds()


def test_builtin_targets_come_from_entry_points() -> None:
    from importlib.metadata import entry_points

    eps = {ep.name for ep in entry_points(group=simulation.ENTRY_POINT_GROUP)}
    assert set(KINDS) >= eps >= {"hbq_asic", "deltallm_fpga", "gpu"}
    for k in KINDS:
        t = simulation.target(k)
        assert isinstance(t, SimTarget) and t.kind == k and t.arch_names


def test_ref_resolves_lazily_and_pickles_as_its_name() -> None:
    r = Ref("math:sqrt")
    assert r(16.0) == 4.0 and r.resolve() is math.sqrt
    r2 = pickle.loads(pickle.dumps(Ref("os.path:join")))
    assert r2 == Ref("os.path:join") and r2("a", "b").endswith("b")
    with pytest.raises(ValueError, match="package.module:name"):
        Ref("no_colon")


def test_a_broken_plugin_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    class BrokenEntryPoint:
        name = "broken"
        value = "nowhere_pkg:TARGET"

        def load(self) -> object:
            raise ModuleNotFoundError("No module named 'nowhere_pkg'")

    class NotATarget(BrokenEntryPoint):
        name = "wrong"
        value = "math:pi"

        def load(self) -> object:
            return math.pi

    eps = dict(simulation._entry_points())
    eps.update(broken=BrokenEntryPoint(), wrong=NotATarget())
    monkeypatch.setattr(simulation, "_ENTRY_POINTS", eps)
    monkeypatch.setattr(simulation, "_BROKEN", {})
    with pytest.raises(CoaccelError, match=r"target 'broken' .*nowhere_pkg:TARGET.*does not load"):
        simulation.target("broken")
    with pytest.raises(CoaccelError, match="must name a coaccel.spine.target.SimTarget"):
        simulation.target("wrong")
    assert "broken" in simulation.kinds()
    # every other target and command still works; the broken ones are named once
    assert {t.kind for t in simulation.targets()} == set(KINDS)
    assert set(simulation.broken()) == {"broken", "wrong"}
    assert main(["sim", "--list"]) == 0
    assert main(["sim", "x.yaml", "--workload", "w"]) == 2


def test_a_kind_two_packages_claim_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulation, "_CLASHES", {"gpu": ["a:TARGET", "b:TARGET"]})
    monkeypatch.setattr(simulation, "_REGISTERED", {})
    with pytest.raises(CoaccelError, match="more than one installed package"):
        simulation.target("gpu")


def test_register_target_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    base = simulation.target("gpu")
    import dataclasses

    t = dataclasses.replace(base, kind="gpu_copy")
    monkeypatch.setattr(simulation, "_REGISTERED", dict(simulation._REGISTERED))
    simulation.register_target(t)
    assert simulation.target("gpu_copy") is t
    with pytest.raises(ValueError, match="already registered"):
        simulation.register_target(dataclasses.replace(base, kind="gpu_copy"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_knob_is_a_key_of_the_targets_configs(kind: str) -> None:
    """A knob's key and its example values override the target's reference design (the one
    its demo reports)."""
    t = simulation.target(kind)
    assert t.knobs, f"{kind} declares no knobs"
    name = (t.report.demo_arch if t.report else None) or t.arch_names[0]
    _, arch = simulation.load_arch(f"{kind}/{name}")
    for knob in t.knobs:
        values = yaml.safe_load(knob.example)
        assert isinstance(values, list) and values, knob
        for v in values:
            changed = override(arch, {knob.key: v})
            assert changed is not arch, (knob.key, v)


@pytest.mark.parametrize("kind", KINDS)
def test_roles_resolve(kind: str) -> None:
    """Every declared callable names an existing object (a typo in a Ref fails here, not at a
    user's command)."""
    t = simulation.target(kind)
    refs = [t.load_arch, t.load_workload, t.simulate, t.priced_components, t.format_result,
            t.operand_format, t.energy_validation, t.config_type, *t.commands]  # fmt: skip
    refs += [v.register for v in t.validations] + [s.run for s in t.demo]
    if t.report is not None:
        refs.append(t.report.build)
        assert t.report.demo_arch is None or t.report.demo_arch in t.arch_names
    for r in refs:
        if isinstance(r, Ref):
            assert callable(r.resolve()), r


def test_validate_list_names_every_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--list"]) == 0
    out = capsys.readouterr().out
    for k in KINDS:
        for v in simulation.target(k).validations:
            assert v.name in out and k in out
    assert main(["validate"]) == 2
    assert "name a validation set" in capsys.readouterr().err


def test_sweep_knobs_lists_every_target(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", "--knobs"]) == 0
    out = capsys.readouterr().out
    for k in KINDS:
        assert out.count(f"{k}: ") == 1
        for knob in simulation.target(k).knobs:
            assert knob.key in out
    assert main(["sweep", "--knobs", "nope"]) == 2
    assert main(["sweep"]) == 2


def test_generic_result_text_has_a_header_and_no_unit_one() -> None:
    from coaccel.commands.sim import format_metrics

    r = simulation.simulate("h200", "flashdecode:B=1,T=4096")
    text = format_metrics(r)
    first = text.splitlines()[0]
    assert first.startswith("gpu | h200 | ") and first.endswith("analytical mode")
    assert not any(line.rstrip().endswith(" 1") for line in text.splitlines()[1:])


def test_demo_stages_come_from_the_registry() -> None:
    from coaccel.commands.demo import _stages

    titles = [title for title, _ in _stages()]
    assert titles[0].startswith("formats") and titles[-1].startswith("report")
    for k in KINDS:
        for st in simulation.target(k).demo:
            assert st.title in titles


def test_only_like_validation_rows_are_averaged() -> None:
    rows = (
        Target("system_energy", "a", 110.0, 100.0, "J", 10.0, "src"),
        Target("system_energy", "b", 95.0, 100.0, "J", 10.0, "src"),
        # information rows: no tolerance; an energy in another unit must not enter the mean
        Target("system_energy", "breakdown", 5.0, 1.0, "GB", None, "src"),
    )
    s = Validation(rows).error_summary("system_energy")
    assert s.n == 2 and s.unit == "J"
    assert s.rms_pct == pytest.approx(math.sqrt((10.0**2 + 5.0**2) / 2))
    assert s.max_abs_pct == pytest.approx(10.0)
    mixed = (*rows[:2], Target("system_energy", "c", 1.0, 1.0, "GB", 5.0, "src"))
    with pytest.raises(ValueError, match="several units"):
        Validation(mixed).error_summary("system_energy")


def test_help_and_list_do_not_import_simulators() -> None:
    """``coaccel --help`` and ``coaccel sim --list`` load the target declarations only."""
    code = (
        "import sys\n"
        "from coaccel.cli import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['sim', '--list'])\n"
        "heavy = [m for m in ('numba', 'matplotlib', 'coaccel.sim.hbq_asic', 'coaccel.models')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
