"""A small Flask-like repository: a framework package whose `route` decorator factory is
defined once, in a base class, and an application that uses it the ways Flask apps do
(`@app.route` on an instance made in another module and imported, `@bp.route` on a
blueprint, a plain `app.route(...)(view)` call, a parameter annotated with the class), next
to look-alikes that are not uses of it: another class's `route` and a receiver whose type
no file states.

`ROUTE_USES` lists every use of `Scaffold.route` as (path, line, enclosing symbol): what
references must find, with the line of the use.
"""

from __future__ import annotations

FILES: dict[str, str] = {
    "flasky/__init__.py": '''\
"""A tiny web framework."""
from .app import Flask
from .blueprints import Blueprint
''',
    "flasky/scaffold.py": '''\
class Scaffold:
    """What applications and blueprints share: the routing decorator."""

    def route(self, rule, **options):
        def decorator(view):
            self.add_url_rule(rule, view.__name__, view, **options)
            return view

        return decorator

    def add_url_rule(self, rule, endpoint, view, **options):
        raise NotImplementedError
''',
    "flasky/app.py": """\
from .scaffold import Scaffold


class Flask(Scaffold):
    def __init__(self, import_name):
        self.import_name = import_name
        self.rules = []

    def add_url_rule(self, rule, endpoint, view, **options):
        self.rules.append((rule, endpoint, view))
""",
    "flasky/blueprints.py": """\
from .scaffold import Scaffold


class Blueprint(Scaffold):
    def __init__(self, name, import_name):
        self.name = name
        self.deferred = []

    def add_url_rule(self, rule, endpoint, view, **options):
        self.deferred.append((rule, endpoint, view))
""",
    "shop/app.py": """\
from flasky import Flask

app = Flask(__name__)


@app.route("/")
def index():
    return "index"


@app.route("/about")
def about():
    return "about"


def health():
    return "ok"


app.route("/health")(health)
""",
    "shop/views.py": """\
from flasky import Blueprint, Flask
from shop.app import app

admin = Blueprint("admin", __name__)


@app.route("/items")
def items():
    return []


@admin.route("/users")
@login_required
def users():
    return []


def mount(site: Flask):
    site.route("/late")(items)
    site.route("/later")(users)


class Router:
    def route(self, rule):
        return rule


def decoys(unknown, router: Router):
    unknown.route("/not-known")
    router.route("/elsewhere")
""",
}

# (path, line, enclosing symbol) of every use of flasky.scaffold.Scaffold.route.
ROUTE_USES: list[tuple[str, int, str]] = [
    ("shop/app.py", 6, "shop.app.index"),
    ("shop/app.py", 11, "shop.app.about"),
    ("shop/app.py", 20, "shop.app"),
    ("shop/views.py", 7, "shop.views.items"),
    ("shop/views.py", 12, "shop.views.users"),
    ("shop/views.py", 19, "shop.views.mount"),
    ("shop/views.py", 20, "shop.views.mount"),
]
