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
    # Data only: the expectations files and profiles a run of a known implementation names (package-data).
    "tokenspec.reports": "reports",
}

packages = []
for name, folder in ROOTS.items():
    packages.append(name)
    if name != "tokenspec.reports":  # its run folders are committed evidence, not part of the package
        packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(package_dir=ROOTS, packages=packages)
