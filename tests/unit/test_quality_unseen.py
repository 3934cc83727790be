"""The unseen corpora's pure parts: doc removal per language, queries from doc comments,
small files, halves, candidates, and the committed datasets' integrity."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from bench.quality import history, unseen
from bench.quality.corpus import PackageSource
from bench.quality.datasets import Answer
from retrieval.indexing.parsing import CodeParser
from retrieval.indexing.parsing.nodes import CodeNode

GO = """\
package flags

// ParseBool reads a boolean flag value from its text form.
// It accepts the usual spellings.
func ParseBool(s string) (bool, error) {
	return s == "true", nil
}

func Other() {}
"""

RUST = """\
/// Returns the maximum log level the logger will accept.
pub fn max_level() -> LevelFilter {
    LevelFilter::Off
}
"""

JAVA = """\
public class Flags {
    /**
     * Converts a {@code Boolean} to a boolean handling {@code null} as false.
     */
    @Deprecated
    public static boolean toBoolean(Boolean bool) {
        return bool != null && bool;
    }
}
"""


def _nodes(path: str, text: str) -> list[CodeNode]:
    parsed = CodeParser().parse(path, text.encode())
    assert parsed is not None
    return list(parsed.nodes)


def test_doc_comments_are_cut_in_go_rust_and_java() -> None:
    for path, text, name in (
        ("flags.go", GO, "ParseBool"),
        ("src/lib.rs", RUST, "max_level"),
        ("Flags.java", JAVA, "toBoolean"),
    ):
        nodes = [n for n in _nodes(path, text) if n.name == name]
        assert nodes and nodes[0].docstring, path
        language = {"go": "go", "rs": "rust", "java": "java"}[path.rsplit(".", 1)[1]]
        stripped, cut = unseen.strip_doc(text, language, nodes)
        assert cut == {nodes[0].qualified_name}
        again = [n for n in _nodes(path, stripped) if n.name == name]
        assert not (again[0].docstring or "").strip(), path
        assert name in stripped
    stripped, _ = unseen.strip_doc(JAVA, "java", [n for n in _nodes("Flags.java", JAVA)])
    assert "@Deprecated" in stripped  # annotations stay, only the comment goes


OVERLOADS = """\
public class Regex {
    /**
     * Removes each substring of the text that matches the given pattern.
     */
    public static String removeAll(String text, String regex) {
        return text;
    }

    /**
     * Removes each substring of the text that matches the given pattern.
     */
    public static String removeAll(String text, Object pattern) {
        return text;
    }

    /**
     * Replaces the first substring of the text that matches the given pattern.
     */
    public static String replaceFirst(String text, String regex) {
        return text;
    }
}
"""


def test_a_sentence_that_also_documents_an_overload_is_never_a_question() -> None:
    """Overloads (`removeAll#2`) are never targets, but their docs count when deciding
    whether a sentence names one definition: otherwise the question has two answers."""
    files = {"Regex.java": OVERLOADS}
    queries, final, notes = unseen._semantic_and_symbol(
        "nested",
        "nested-java",
        files,
        CodeParser(),
        random.Random(0),
        semantic=10,
        symbol=0,
        eligible=lambda f, n: n.kind == "method",
        symbol_text=lambda n: n.name,
    )
    assert [q.answers[0].qualified_name for q in queries] == ["Regex.replaceFirst"]
    assert notes["semantic_candidates"] == 1
    assert "Removes each substring" in files["Regex.java"]  # the ambiguous docs stay
    assert "Replaces the first" not in files["Regex.java"]  # the question's doc is cut
    assert final


def test_doc_sentence_unwraps_javadoc_tags_and_refuses_non_prose() -> None:
    assert unseen.doc_sentence("Converts a {@code Boolean} to a boolean value. More.") == (
        "Converts a Boolean to a boolean value."
    )
    assert unseen.doc_sentence("TODO: write this properly one day") is None
    assert unseen.doc_sentence("Too short.") is None
    assert unseen.doc_sentence(None) is None


def _query(corpus: str, klass: unseen.UnseenClass, i: int) -> unseen.UQuery:
    answer = Answer("local/unseen/x", f"m{i}.py", f"m{i}.f", 1, 2)
    return unseen.UQuery("", corpus, klass, "python", f"q{i}", (answer,), 0)


def test_halves_alternate_per_corpus_and_class_and_are_seeded() -> None:
    queries = [_query("a", "semantic", i) for i in range(10)]
    queries += [_query("b", "symbol", i) for i in range(7)]
    first = unseen.assign_halves(queries)
    assert first == unseen.assign_halves(queries)
    halves = Counter((q.corpus, q.half) for q in first)
    assert halves == {("a", 0): 5, ("a", 1): 5, ("b", 0): 4, ("b", 1): 3}
    assert first[0].id == "a-semantic-0000" and first[-1].id == "b-symbol-0006"


def test_a_query_with_several_answers_matches_any_of_them() -> None:
    answers = (
        Answer("r", "a.py", "a.f", 1, 3),
        Answer("r", "b.py", "b.g", 4, 9),
    )
    query = unseen.UQuery("h-0", "history", "localisation", "python", "fix g", answers, 1)
    assert query.matches("r", "b.py", "b.g", 4, 9)
    assert query.matches("r", "a.py", "a.f", 1, 3)
    assert not query.matches("r", "a.py", "a.other", 1, 3)
    assert query.repo == "r"


def test_small_files_hold_one_or_two_neighbouring_functions(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    root.mkdir()
    body = "\n\n".join(
        f"@decorate\ndef f{i}(x):\n    '''Doc {i}.'''\n    return x + {i}\n" for i in range(12)
    )
    (root / "mod.py").write_text(body)
    source = PackageSource("pkg", "python", root, "1", ("mod.py",))
    files = unseen._small_file_texts([source], CodeParser(), random.Random(1), 6)
    assert 1 <= len(files) <= 6
    seen: list[str] = []
    for path, text in files.items():
        assert path.startswith("pkg/mod/") and path.endswith(".py")
        names = [n.name for n in _nodes(path, text) if n.kind == "function"]
        assert 1 <= len(names) <= 2
        assert text.startswith("@decorate")
        if len(names) == 2:
            assert int(names[1][1:]) == int(names[0][1:]) + 1
        seen += names
    assert len(seen) == len(set(seen))  # no function lands in two files


def test_candidates_are_every_definition_with_its_source() -> None:
    files = {"flags.go": GO}
    parsed = unseen.parse_tree(CodeParser(), files)
    found = unseen.candidates("r", files, parsed)
    assert [c.qualified_name for c in found] == ["flags.ParseBool", "flags.Other"]
    assert found[0].text.startswith("func ParseBool") and found[0].text.endswith("}")
    # The doc comment lies outside the lines; dense+doc reads it before them.
    assert found[0].doc.startswith("ParseBool reads a boolean flag value")
    assert found[0].documented_text == f"{found[0].doc}\n{found[0].text}"
    assert found[1].doc == "" and found[1].documented_text == found[1].text


def test_python_candidates_carry_their_docstring_in_their_lines_only() -> None:
    files = {"m.py": 'def f():\n    """Do the thing."""\n    return 1\n'}
    found = unseen.candidates("r", files, unseen.parse_tree(CodeParser(), files))
    assert found[0].doc == "" and "Do the thing." in found[0].text


def test_committed_history_sets_point_at_their_snapshots() -> None:
    for name in ("history-packaging", "history-log"):
        data = history.load(name)
        files = unseen.snapshot_files(unseen.CORPORA_DIR / data["snapshot"])
        assert len(data["base"]) == 40 and data["queries"]
        parser = CodeParser()
        names = {
            (f.path, n.qualified_name) for f in unseen.parse_tree(parser, files) for n in f.nodes
        }
        for item in data["queries"]:
            assert 1 <= len(item["answers"]) <= history.MAX_ANSWERS
            for answer in item["answers"]:
                assert (answer["path"], answer["qualified_name"]) in names, item
