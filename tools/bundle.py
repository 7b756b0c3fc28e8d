"""Zips for infra/ (Terraform has no archive provider here): the functions' bundle and the layer.

    python tools/bundle.py code OUT.zip [--app-dir examples]   # lib/dormant (+ static/), functions/, the app
    python tools/bundle.py layer OUT.zip LAYER_DIR              # what `make lambda-layer` built (python/...)

The code bundle holds exactly what `make build-WorkerFunction` copies for `sam build`. Both zips are
reproducible (sorted entries, fixed timestamps and modes), so Terraform's source_code_hash changes only when
a file does.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EPOCH = (1980, 1, 1, 0, 0, 0)


def code_files(app_dir: Path) -> dict[str, Path]:
    """zip path -> file: lib/dormant/**.py as dormant/..., functions/**.py, the app's package under its name."""
    files = {str(p.relative_to(ROOT / "lib")): p for p in (ROOT / "lib" / "dormant").rglob("*.py")}
    # the dashboard's and Swagger UI's files, served by the API from the package
    files |= {str(p.relative_to(ROOT / "lib")): p for p in (ROOT / "lib" / "dormant" / "http" / "static").rglob("*")
              if p.is_file()}
    files |= {str(p.relative_to(ROOT)): p for p in (ROOT / "functions").rglob("*.py")}
    if app_dir.is_file():
        files[app_dir.name] = app_dir
    else:
        files |= {str(p.relative_to(app_dir.parent)): p for p in app_dir.rglob("*.py")}
    return {name: path for name, path in files.items() if "__pycache__" not in name}


def layer_files(layer_dir: Path) -> dict[str, Path]:
    if not (layer_dir / "python").is_dir():
        raise SystemExit(f"{layer_dir} has no python/ folder: run `make lambda-layer` first")
    return {str(p.relative_to(layer_dir)): p for p in layer_dir.rglob("*") if p.is_file()}


def write_zip(out: Path, files: dict[str, Path]) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name].read_bytes())
    partial.replace(out)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=["code", "layer"])
    parser.add_argument("out", type=Path)
    parser.add_argument("layer_dir", type=Path, nargs="?")
    parser.add_argument("--app-dir", type=Path, default=ROOT / "examples")
    args = parser.parse_args(argv)
    if args.kind == "code":
        app_dir = args.app_dir if args.app_dir.is_absolute() else Path.cwd() / args.app_dir
        write_zip(args.out, code_files(app_dir.resolve()))
    else:
        if args.layer_dir is None:
            parser.error("layer needs LAYER_DIR")
        write_zip(args.out, layer_files(args.layer_dir))


if __name__ == "__main__":
    main(sys.argv[1:])
