"""mkdocs hook: links to repository files outside docs/ go to the repository's web view on the built site.

The pages link to such files from the repository's root (`/bench/results/2026-11-24-nginx-5m.md`, `/helm/`), which
GitHub resolves against the repository and a site served from its own root does not. On the built site each one
becomes `{repo_url}/blob/{branch}/path` (a directory: `tree/`), the branch read from `edit_uri` (`edit/main/docs/`).
A link to a path that is not in the repository is a warning, so `mkdocs build --strict` fails on it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.repo_links")

#: an href or src attribute whose value is a root-relative path (not //host, a protocol-relative URL)
ROOT_LINK = re.compile(r'(?P<attr>\b(?:href|src))="/(?P<path>(?!/)[^"#?]*)(?P<rest>[^"]*)"')


def repo_target(repo_url: str, branch: str, root: Path, path: str) -> str | None:
    """The web view's URL of `path` (relative to the repository's root `root`); None when it is not there."""
    where = root / path
    if not path or not where.exists():
        return None
    kind = "tree" if where.is_dir() else "blob"
    return f"{repo_url.rstrip('/')}/{kind}/{branch}/{path.rstrip('/')}"


def rewrite(html: str, repo_url: str, branch: str, root: Path, page: str) -> str:
    """`html` with every root-relative link to a repository file pointing at the repository's web view."""

    def one(m: re.Match[str]) -> str:
        target = repo_target(repo_url, branch, root, m.group("path"))
        if target is None:
            log.warning("%s: a link to /%s, which is not a file of the repository", page, m.group("path"))
            return m.group(0)
        return f'{m.group("attr")}="{target}{m.group("rest")}"'

    return ROOT_LINK.sub(one, html)


def branch_of(edit_uri: str) -> str:
    """`edit/main/docs/` -> `main`."""
    parts = [p for p in edit_uri.split("/") if p]
    if len(parts) < 2 or parts[0] not in ("edit", "blob"):
        raise ValueError(f"edit_uri {edit_uri!r} is not edit/BRANCH/docs/")
    return parts[1]


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    repo_url = config["repo_url"]
    if not repo_url:
        log.warning("repo_url is not set: links to repository files cannot resolve on the site")
        return html
    root = Path(config["config_file_path"]).resolve().parent
    return rewrite(html, repo_url, branch_of(config["edit_uri"] or ""), root, page.file.src_uri)
