"""Sub-commands of the coaccel CLI (one module each, see coaccel.cli)."""
