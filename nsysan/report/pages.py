"""Pages beside the report (the diff page, the batch index) in the report's style.

Same Jinja2 environment (autoescaped, strict) and the same inlined stylesheet as the
report, so they open offline and look like it.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from nsysan import __version__
from nsysan.report import html as _report_html
from nsysan.report.i18n import t


def render_page(template: str, lang: str, **context: Any) -> str:
    """Render ``templates/<template>`` with ``t``, ``lang``, ``css`` and ``version``."""

    def tr(key: str, **params: object) -> str:
        return t(key, lang, **params)

    env = _report_html._environment()
    return env.get_template(template).render(
        t=tr,
        lang=lang,
        css=Markup(_report_html._css()),
        version=__version__,
        script_json=_report_html.script_json,
        **context,
    )
