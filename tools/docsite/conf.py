"""Sphinx configuration of the gpufleet.sglang docs site (`make docs`, tools/docsite/build.sh).

Started from `antsibull-docs sphinx-init` 2.28.0, then: no intersphinx (the build machine reaches
PyPI only, and an inventory that cannot be fetched is a warning, and warnings are errors here),
MyST for the Markdown pages of docs/, and `nitpicky` kept on so every broken reference fails.
"""

project = "gpufleet.sglang"
copyright = "gpufleet maintainers"
title = "gpufleet.sglang documentation"
html_short_title = "gpufleet.sglang"

extensions = ["sphinx.ext.autodoc", "sphinx_antsibull_ext", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}

pygments_style = "ansible"
highlight_language = "YAML+Jinja"

html_theme = "sphinx_ansible_theme"
html_show_sphinx = False
display_version = False
html_use_smartypants = True
html_use_modindex = False
html_use_index = False
html_copy_source = False
html_theme_options = {"collapse_navigation": False, "show_extranav": True}

# Markdown pages (docs/*.md): headings get anchors so that "page.md#section" links resolve
myst_heading_anchors = 4

default_role = "any"
nitpicky = True
