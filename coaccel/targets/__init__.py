"""coaccel's own targets, each a folder that declares everything the target offers.

A target folder holds the target's :class:`~coaccel.spine.target.SimTarget` (in its
``__init__``, registered in the ``coaccel.targets`` entry-point group of ``pyproject.toml``) and
the pieces above the simulator that only that target has: its validation sets, its report part,
its result text, its demo stages and any command of its own. Its reference lives in
``models/<name>/``, its simulator in ``sim/<name>/``, its shipped architectures in
``arch_configs/<kind>/`` and its RTL in ``rtl/<name>/``.

Nothing else in coaccel imports these packages: the registry (:mod:`coaccel.simulation`) finds
them by entry point, exactly as it finds a target that another package installs.

* :mod:`.hbq_asic`: the HBQ 28 nm ASIC (``kind: hbq_asic``).
* :mod:`.deltallm_fpga`: the DeltaLLM vector processor on the AMD KV260 (``kind: deltallm_fpga``).
* :mod:`.gpu`: GPU memory hierarchies (``kind: gpu``).
"""
