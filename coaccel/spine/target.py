"""What a target declares about itself: the one contract between coaccel and its targets.

A *target* is a design coaccel can simulate, cost, report and validate (the HBQ ASIC, the
DeltaLLM processor on the KV260, a GPU memory hierarchy, or one from another installed package).
It publishes one :class:`SimTarget` through the ``coaccel.targets`` entry-point group, the way
pytest and Dask find their plug-ins::

    [project.entry-points."coaccel.targets"]
    systolic = "coaccel_systolic:TARGET"

Everything above the simulators (:func:`coaccel.simulate`, the cost model, sweeps, reports,
validation, the demo and the command line) reads targets only through this description and the
registry in :mod:`coaccel.simulation`; none of it imports a target or tests a kind's name.

The description is cheap to import: its callables may be :class:`Ref` objects (``"module:name"``,
imported on first call), so that ``coaccel --help`` and ``coaccel sim --list`` do not load a
simulator.

Public: :class:`SimTarget`, :class:`AccuracyVariant`, :class:`ReportRole`, :class:`ValidationSet`,
:class:`DemoStage`, :class:`Knob`, :class:`SynthesisSet`, :class:`Ref`, :func:`shipped_arch_names`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AccuracyVariant",
    "DemoStage",
    "Knob",
    "Ref",
    "ReportRole",
    "SimTarget",
    "SynthesisSet",
    "ValidationSet",
    "shipped_arch_names",
]


class Ref:
    """A callable (or any object) named ``"package.module:name"``, imported on first use.

    Calling a :class:`Ref` imports the module and calls the named object; :meth:`resolve`
    returns the object itself. It pickles as its name, so target descriptions travel to worker
    processes without importing anything.

    Args:
        path: ``"package.module:name"`` (the name may be dotted: ``"mod:Class.method"``).
    """

    __slots__ = ("_obj", "path")

    def __init__(self, path: str) -> None:
        module, sep, name = path.partition(":")
        if not sep or not module or not name:
            raise ValueError(f"Ref: expected 'package.module:name', got {path!r}")
        self.path = path
        self._obj: Any = None

    def resolve(self) -> Any:
        """The named object (imported once)."""
        if self._obj is None:
            module, _, name = self.path.partition(":")
            obj: Any = importlib.import_module(module)
            for part in name.split("."):
                obj = getattr(obj, part)
            self._obj = obj
        return self._obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (Ref, (self.path,))

    def __repr__(self) -> str:
        return f"Ref({self.path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ref) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)


def resolve(obj: Any) -> Any:
    """``obj`` itself, or the object a :class:`Ref` names."""
    return obj.resolve() if isinstance(obj, Ref) else obj


@dataclass(frozen=True)
class Knob:
    """A configuration key worth sweeping, as ``coaccel sweep --knobs`` lists it.

    Attributes:
        key: the dotted config key (``"pe_array.n_pes"``), as a sweep spec's ``params:`` names it.
        help: one line: what it changes and its unit.
        example: a value list as a sweep spec would write it (``"[16, 32, 64]"``).
    """

    key: str
    help: str
    example: str = ""


@dataclass(frozen=True)
class ReportRole:
    """How ``coaccel report`` prices designs of a target (area, resources, energy).

    Attributes:
        summary: one line: what the report shows for this kind (``--help`` and the page).
        build: ``build(archs, settings) -> ReportPart`` where ``archs`` are loaded configs of
            this kind and ``settings`` a :class:`coaccel.report.document.ReportSettings`
            (workloads, scenario, mode, node, area only, output folder for figures). The part
            (:class:`coaccel.report.document.ReportPart`) holds the tables, figures and flat
            CSV rows (value, unit, one sigma, source) that the command writes into one HTML,
            Markdown and CSV report together with the other kinds' parts.
        default_workloads: workloads priced when the command names none.
        default_scenario: scenario priced when the command names none.
        demo_arch: the shipped design ``coaccel demo`` reports for this kind (None: none).
    """

    summary: str
    build: Callable[..., Any]
    default_workloads: tuple[str, ...] = ()
    default_scenario: str | None = None
    demo_arch: str | None = None


@dataclass(frozen=True)
class ValidationSet:
    """One ``coaccel validate NAME``: the target's models beside published figures.

    Attributes:
        name: the sub-command (``"hbq"``).
        help: one line for ``coaccel validate --list`` and ``--help``.
        register: ``register(subparsers)`` adds the ``coaccel validate NAME`` parser (its
            options, and ``func`` that runs it and returns the exit status).
    """

    name: str
    help: str
    register: Callable[[Any], None]


@dataclass(frozen=True)
class DemoStage:
    """A stage of ``coaccel demo``.

    Attributes:
        title: one line printed when the stage starts.
        run: ``run(out_dir: Path, rng: numpy.random.Generator) -> None``; prints a short summary
            (stdout) and writes its files under ``out_dir``.
        order: where it runs: 10 references, 20 simulators, 30 offload studies; the generic
            stages (formats 0, accuracy 5, sweep 40, report 50) sit around the targets'.
    """

    title: str
    run: Callable[..., None]
    order: int = 20


@dataclass(frozen=True)
class SynthesisSet:
    """One ``coaccel synth --target NAME``: Yosys runs over a target's RTL blocks, one table.

    Attributes:
        name: the ``--target`` value (``"hbq"``).
        help: one line for ``coaccel synth --list`` and ``--help``.
        table: file name of the table; the committed one is ``rtl/synth/<table>``.
        rtl_folder: the folder under ``rtl/`` that holds the blocks' Verilog (``"hbq"``).
        groups: ``groups() -> {group: (point, ...)}``: every design point
            (:class:`coaccel.synth.SynthPoint`) by sweep group, in table order
            (``--blocks`` selects groups).
        view: what every point is synthesized into: ``"asic+fpga"`` (generic CMOS gates with a
            transistor estimate, and UltraScale+ cells; columns
            :data:`coaccel.synth.COLUMNS`) or ``"fpga"`` (UltraScale+ cells only, with block,
            Ultra and distributed RAM; columns :data:`coaccel.synth.FPGA_COLUMNS`).
        summary: ``summary(rows) -> str``: what ``coaccel synth`` prints after the table
            (comparisons with published figures, a device's share, ...) for table rows (values
            as CSV text); None: nothing.
        default: the set ``coaccel synth`` runs without ``--target`` (the first such set in
            kind order; without any, the first set).
    """

    name: str
    help: str
    table: str
    rtl_folder: str
    groups: Callable[[], Mapping[str, Sequence[Any]]]
    view: str = "asic+fpga"
    summary: Callable[..., str] | None = None
    default: bool = False


@dataclass(frozen=True)
class AccuracyVariant:
    """What one design point changes in a real decoder's forward pass (a perplexity objective).

    A target's :attr:`SimTarget.accuracy_variant` returns one per point; the sweep's perplexity
    scorer (:class:`coaccel.dse.accuracy.PerplexityScorer`) scores each distinct
    ``(setting, mode)`` once on a real decoder (:class:`coaccel.models.nn.Decoder`) and caches
    every metric in the store under a digest of it, so points that differ only in parameters
    outside the setting (buffer sizes, clocks, memory systems) share one score.

    Attributes:
        setting: JSON-able description of everything of the point that changes the decoder's
            numerics, and nothing else: the cache key (``{"weight": {...}, "activation":
            {...}}`` for number formats; ``{"attention": "deltallm", "theta": 4, ...}``).
        transform: ``transform(decoder) -> decoder``: the float decoder with the point's
            numerics (``Decoder.with_numerics``, ``Decoder.with_attention``). It is called once
            per setting and the decoder it returns scores the text windows one after the other,
            so an attention it installs must start a new sequence at every call from position 0.
            None: the decoder unchanged (exact attention, float numerics); the scorer reuses
            the reference model's scores.
        mode: ``"prefill"``: every position of each window is scored by one prefill;
            ``"decode"``: the last ``decode_tokens`` positions of each window are scored by
            teacher-forced decode steps (one token each) after a prefill of the rest.
        label: one short line (``"θ=4 W=16 τ=8 group×4"``).
        min_prompt_tokens: fewest tokens the prefilled prompt of a ``decode`` window needs for
            the variant to act at all (a spec whose windows are shorter is refused).
    """

    setting: Mapping[str, Any]
    transform: Callable[[Any], Any] | None
    mode: str = "prefill"
    label: str = ""
    min_prompt_tokens: int = 0

    def __post_init__(self) -> None:
        if self.mode not in ("prefill", "decode"):
            raise ValueError(f"AccuracyVariant.mode: {self.mode!r}; valid: prefill, decode")


@dataclass(frozen=True)
class SimTarget:
    """A target: its architecture kind and everything coaccel can do with it.

    Attributes:
        kind: the ``kind:`` value of its architecture files (``"hbq_asic"``).
        description: one line for ``coaccel sim --list``.
        modes: simulation modes it offers, fastest first (``("analytical", "cycle")``).
        arch_names: the shipped architecture names (file stems under ``arch_configs/<kind>/``
            of the package that ships them).
        load_arch: ``load_arch(name_or_path) -> config``; raises ``ConfigError``.
        load_workload: ``load_workload("<model>[:<scenario>]" | path) -> workload``; raises
            ``ConfigError``.
        simulate: ``simulate(arch_config, workload, *, mode, **options) -> result`` where the
            result is a :class:`~coaccel.sim.common.result.SimResult` (``metrics()``).
        arch_file: ``arch_file(name) -> Path`` of a shipped architecture name (or a path);
            None: ``arch_configs/<kind>/<name>.yaml`` of coaccel itself.
        config_type: the frozen dataclass schema of its architecture files (may be a
            :class:`Ref`).
        priced_components: ``priced_components(arch_config, result | None)`` -> the typed
            input of the cost model
            (:class:`~coaccel.sim.common.priced.PricedComponents`). None: no cost model.
        options: extra keyword options ``simulate`` accepts, name -> one-line help.
        format_result: ``format_result(result) -> str``, the text ``coaccel sim`` prints (a
            header naming architecture, workload and mode, then the target's detail). None:
            the generic header and metrics table.
        workload_kinds: what ``load_workload`` accepts, in words, for error messages.
        operand_format: ``operand_format(arch_config, role) -> format`` for roles
            ``"weight"``, ``"activation"`` (and ``"kv"`` where the design has one): the
            registered block format (:class:`~coaccel.models.formats.FormatSpec`) an accuracy
            objective quantizes that operand with; raises ``ValueError`` for a format the
            accuracy study cannot run. None: the target has no number formats.
        accuracy_variant: ``accuracy_variant(arch_config, workload) -> AccuracyVariant``, where
            ``workload`` is the point's workload string: what the point changes in a real
            decoder's forward pass (an approximate attention, ...), for ``accuracy: {measure:
            perplexity}`` sweeps; raises ``ValueError`` for a point whose numerics the decoder
            cannot model. None: the target's operand formats (``operand_format``) are its only
            accuracy lever (:func:`coaccel.dse.accuracy.format_variant`).
        energy_validation: ``energy_validation() -> (role, rms_error_pct, note)``: how well the
            target's total energy is validated against published system figures, for the
            sweep report's totals. None: the total is a prediction without a system check.
        report: how ``coaccel report`` prices its designs (:class:`ReportRole`).
        validations: its ``coaccel validate`` sets.
        knobs: configuration keys worth sweeping (``coaccel sweep --knobs``).
        demo: its stages of ``coaccel demo``.
        commands: ``register(subparsers)`` functions of commands the target adds to the
            command line (``coaccel delta``, ...).
        demo_sweep: a shipped sweep spec (file name under ``arch_configs/sweeps/``) that
            ``coaccel demo`` runs for this target; None: none.
        synthesis: its ``coaccel synth`` sets (Yosys gate / FPGA resource tables of its RTL).
        simulate_batch: ``simulate_batch(arch_configs, workload, *, mode) -> dict | None``:
            the analytical mode for many designs in one vectorized evaluation, equal to
            ``simulate`` point by point (:mod:`coaccel.dse.batch` describes the result); a
            sweep evaluates analytical points through it. None: points one at a time.
    """

    kind: str
    description: str
    modes: tuple[str, ...]
    arch_names: tuple[str, ...]
    load_arch: Callable[..., Any]
    load_workload: Callable[..., Any]
    simulate: Callable[..., Any]
    arch_file: Callable[..., Any] | None = None
    config_type: Any = None
    priced_components: Callable[..., Any] | None = None
    options: tuple[tuple[str, str], ...] = ()
    format_result: Callable[..., str] | None = None
    workload_kinds: str = "a model name with an optional :scenario, or a workload YAML file"
    operand_format: Callable[..., Any] | None = None
    accuracy_variant: Callable[..., Any] | None = None
    energy_validation: Callable[..., Any] | None = None
    report: ReportRole | None = None
    validations: tuple[ValidationSet, ...] = ()
    knobs: tuple[Knob, ...] = ()
    demo: tuple[DemoStage, ...] = ()
    commands: tuple[Callable[..., None], ...] = ()
    demo_sweep: str | None = None
    synthesis: tuple[SynthesisSet, ...] = ()
    simulate_batch: Callable[..., Any] | None = None


def shipped_arch_names(kind: str, package: str = "coaccel.arch_configs") -> tuple[str, ...]:
    """The architecture files a package ships for a kind: stems of ``<package>/<kind>/*.yaml``.

    Args:
        kind: the target's ``kind:``.
        package: the data package holding a ``<kind>/`` folder of YAML files.

    Returns:
        The sorted file stems (empty when the folder does not exist).
    """
    from importlib.resources import files

    folder = files(package).joinpath(kind)
    if not folder.is_dir():
        return ()
    return tuple(sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".yaml")))
