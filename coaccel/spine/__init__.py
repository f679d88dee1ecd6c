"""The spine: what every layer of coaccel stands on.

- :mod:`coaccel.spine.config`: YAML -> frozen dataclasses, schema checks, overrides, digests.
- :mod:`coaccel.spine.units`: quantities with units in config values.
- :mod:`coaccel.spine.errors`: the error types every command turns into one line.
- :mod:`coaccel.spine.trace`: the trace contract between references and simulators.
- :mod:`coaccel.spine.workload`: model shapes and scenarios.

It imports numpy and pyyaml only; references, simulators and everything above import it.
The long-standing paths ``coaccel.config``, ``coaccel.errors``, ``coaccel.trace`` and
``coaccel.workload`` name the same modules.
"""
