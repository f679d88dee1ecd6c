"""Package discovery for coaccel's design-card layout.

``models/`` and ``sim/`` live at the repository root but are installed as ``coaccel.models`` and
``coaccel.sim``; ``arch_configs/`` ships as the data package ``coaccel.arch_configs``. Sub-packages
are discovered here so that adding one needs no edit to ``pyproject.toml``.
"""

from setuptools import find_packages, setup

ROOTS = {
    "coaccel": "coaccel",
    "coaccel.models": "models",
    "coaccel.sim": "sim",
    "coaccel.arch_configs": "arch_configs",
}

packages = []
package_dir = {}
for name, path in ROOTS.items():
    packages.append(name)
    package_dir[name] = path
    for sub in find_packages(path):
        packages.append(f"{name}.{sub}")
        package_dir[f"{name}.{sub}"] = f"{path}/{sub.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)
