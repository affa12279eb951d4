#!/usr/bin/env python3
"""Unit tests of `size_check.py` on tricky Rust inputs: `python3 scripts/test_size_check.py`."""

import io
import os
import sys
import tempfile
import textwrap
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import size_check  # noqa: E402


def fns(src: str) -> list:
    """(name, first line, last line) of every function of `src`."""
    return [(f.name, f.first_line, f.last_line) for f in size_check.functions(src)]


def rust(src: str) -> str:
    return textwrap.dedent(src).lstrip("\n")


class BlankingTest(unittest.TestCase):
    def test_keeps_newlines_and_length(self):
        src = 'let s = "a\n{b"; // x {\n/* y\n} */ z'
        code = size_check.blank_non_code(src)
        self.assertEqual(len(code), len(src))
        self.assertEqual(code.count("\n"), src.count("\n"))
        self.assertNotIn("{", code)
        self.assertNotIn("}", code)
        self.assertIn("z", code)

    def test_lifetimes_are_code_chars_are_not(self):
        code = size_check.blank_non_code("fn f<'a>(x: &'a str) -> char { '{' }")
        self.assertIn("<'a>", code)
        self.assertIn("&'a str", code)
        self.assertEqual(code.count("{"), 1)
        self.assertEqual(code.count("}"), 1)

    def test_escaped_and_unicode_chars(self):
        for lit in ["'\\''", "'\\\\'", "'\\u{7b}'", "'\\x7d'", "b'{'", "b'\\''", "'é'"]:
            with self.subTest(lit=lit):
                code = size_check.blank_non_code(f"let c = {lit}; {{ }}")
                self.assertEqual(code.replace(" ", ""), "letc=;{}")

    def test_raw_strings(self):
        for lit in ['r"{"', 'r#"a "quoted" } "#', 'r##"x "# } "##', 'br#"{"#', 'cr"}"']:
            with self.subTest(lit=lit):
                code = size_check.blank_non_code(f"x({lit}); {{}}")
                self.assertEqual(code.replace(" ", ""), "x();{}")

    def test_raw_identifiers_are_not_raw_strings(self):
        code = size_check.blank_non_code('let r#type = 1; let s = "}";')
        self.assertIn("r#type", code)
        self.assertNotIn("}", code)

    def test_strings_with_escapes_and_prefixes(self):
        code = size_check.blank_non_code('a("\\"{", b"}", c"{", "\\\\"); {}')
        self.assertEqual(code.replace(" ", ""), "a(,,,);{}")

    def test_nested_block_comments(self):
        code = size_check.blank_non_code("a /* x /* } */ { */ b")
        self.assertEqual(code.split(), ["a", "b"])

    def test_unterminated_literals_are_errors(self):
        for src in ['"abc', "/* x", 'r#"x"', "'\\"]:
            with self.subTest(src=src), self.assertRaises(size_check.SourceError):
                size_check.blank_non_code(src)


class FunctionTest(unittest.TestCase):
    def test_counts_fn_line_to_closing_brace(self):
        src = rust(
            """
            /// Docs are not counted.
            #[inline]
            fn four() {
                let a = 1;
                let b = a;
            }
            """
        )
        self.assertEqual(fns(src), [("four", 3, 6)])
        self.assertEqual(size_check.functions(src)[0].lines, 4)

    def test_braces_in_literals_and_comments_do_not_count(self):
        src = rust(
            """
            fn tricky<'a>(s: &'a str) -> char {
                let open = '{';
                let quote = '\\'';
                let raw = r#"}"# ;
                // } fn fake() {
                /* } /* nested } */ } */
                let text = "fn in_string() { }";
                '}'
            }
            fn after() {}
            """
        )
        self.assertEqual(fns(src), [("tricky", 1, 9), ("after", 10, 10)])

    def test_closures_are_part_of_their_function(self):
        src = rust(
            """
            fn outer() {
                let f = |x: u8| {
                    let g = |y: u8| { y + 1 };
                    g(x)
                };
                f(1);
            }
            """
        )
        self.assertEqual(fns(src), [("outer", 1, 7)])

    def test_nested_functions_are_measured_on_their_own(self):
        src = rust(
            """
            fn outer() {
                fn inner() {
                    let x = 1;
                }
                inner();
            }
            """
        )
        self.assertEqual(fns(src), [("outer", 1, 6), ("inner", 2, 4)])

    def test_declarations_and_pointer_types_are_not_functions(self):
        src = rust(
            """
            trait T {
                fn declared(&self) -> u8;
                fn defaulted(&self) -> u8 { 1 }
            }
            extern "C" {
                fn abs(x: i32) -> i32;
            }
            fn apply(f: fn(u8) -> u8, g: fn (u8)) -> u8 { f(1) }
            macro_rules! m { ($name:ident) => { fn $name() {} }; }
            """
        )
        self.assertEqual(fns(src), [("defaulted", 3, 3), ("apply", 8, 8)])

    def test_signatures_with_where_impl_and_const_generics(self):
        src = rust(
            """
            fn make<T, const N: usize>(x: [T; { N }]) -> impl Fn(u8) -> Vec<[u8; N]>
            where
                T: Clone + 'static,
            {
                move |_| Vec::new()
            }
            fn braced() -> Foo<{ 1 + 2 }> {
                Foo
            }
            fn r#match() {}
            """
        )
        self.assertEqual(fns(src), [("make", 1, 6), ("braced", 7, 9), ("match", 10, 10)])

    def test_unbalanced_body_is_an_error(self):
        with self.assertRaises(size_check.SourceError):
            size_check.functions("fn open() {\n let x = 1;\n")


class OffenderTest(unittest.TestCase):
    def test_long_function_and_file(self):
        body = "\n".join("    let _ = 1;" for _ in range(69))
        src = f"fn long() {{\n{body}\n}}\nfn ok() {{\n}}\n" + "\n" * 430
        found = size_check.offenders_in("a/b.rs", src)
        self.assertEqual(
            [o.message for o in found],
            ["a/b.rs:1: file is 503 lines (max 500)", "a/b.rs:1: fn long is 71 lines (max 70)"],
        )
        self.assertEqual([o.key for o in found], ["a/b.rs", "a/b.rs::long"])

    def test_at_the_limits_is_fine(self):
        body = "\n".join("    let _ = 1;" for _ in range(68))
        src = f"fn exactly() {{\n{body}\n}}\n" + "\n" * 430
        self.assertEqual(size_check._line_count(src), 500)
        self.assertEqual(size_check.offenders_in("x.rs", src), [])


class AllowListTest(unittest.TestCase):
    def test_entries_need_a_reason(self):
        text = "# header\n\na.rs  # test file\nb.rs::f # match table\n"
        self.assertEqual(size_check.parse_allowlist(text), {"a.rs": 3, "b.rs::f": 4})
        for bad in ["a.rs\n", "a.rs #   \n", "a.rs b.rs # two\n", "a.rs # x\na.rs # y\n"]:
            with self.subTest(bad=bad), self.assertRaises(size_check.AllowListError):
                size_check.parse_allowlist(bad)

    def test_workspace_check(self):
        long_fn = "fn long() {\n" + "    x();\n" * 70 + "}\n"
        with tempfile.TemporaryDirectory() as root:
            os.makedirs(os.path.join(root, "src"))
            os.makedirs(os.path.join(root, "target", "debug"))
            os.makedirs(os.path.join(root, ".git"))
            for rel in ["src/lib.rs", "target/debug/gen.rs", ".git/x.rs"]:
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(long_fn)
            self.assertEqual(size_check.rust_files(root), ["src/lib.rs"])

            out = io.StringIO()
            self.assertEqual(size_check.check(root, {}, False, out), 1)
            self.assertIn("src/lib.rs:1: fn long is 72 lines (max 70)", out.getvalue())

            out = io.StringIO()
            self.assertEqual(size_check.check(root, {"src/lib.rs::long": 1}, False, out), 0)

            out = io.StringIO()
            allow = {"src/lib.rs::long": 1, "src/gone.rs": 2}
            self.assertEqual(size_check.check(root, allow, False, out), 1)
            self.assertIn("`src/gone.rs` is within budget now", out.getvalue())

            out = io.StringIO()
            self.assertEqual(size_check.check(root, {"src/lib.rs::long": 1}, True, out), 0)
            self.assertIn("fn long is 72 lines (max 70)  [allowed]", out.getvalue())

            with open(os.path.join(root, "src", "bad.rs"), "wb") as f:
                f.write(b"fn f() { let s = \"\xff\"; }\n")
            with open(os.path.join(root, "src", "open.rs"), "w", encoding="utf-8") as f:
                f.write("fn f() {\n")
            out = io.StringIO()
            self.assertEqual(size_check.check(root, {"src/lib.rs::long": 1}, False, out), 1)
            self.assertIn("src/bad.rs: cannot measure:", out.getvalue())
            self.assertIn("src/open.rs: cannot measure: line 1: fn f: unbalanced", out.getvalue())


if __name__ == "__main__":
    unittest.main()
