"""The architecture files this package ships: ``systolic/<name>.yaml`` (a data package)."""
