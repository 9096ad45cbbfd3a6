"""Map the repository's top-level folders onto the ``tokenspec`` import namespace.

Metadata lives in pyproject.toml; only the folder -> package mapping is computed here, so a new
sub-package is picked up without editing a list.
"""

from setuptools import find_packages, setup

ROOTS = {
    "tokenspec": "tokenspec",
    "tokenspec.suite": "suite",
    "tokenspec.harness": "harness",
    "tokenspec.specs": "specs",
    "tokenspec.golden": "golden",
}

packages = []
for name, folder in ROOTS.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(package_dir=ROOTS, packages=packages)
