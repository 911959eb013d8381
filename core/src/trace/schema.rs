//! The JSON Schema of trace files (SPEC section 10), and the strict reading it gives.
//!
//! The schema is generated from the Rust types (`schemars`, the `schema` feature) and committed
//! as `core/trace-format.schema.json`; a test regenerates it and fails when the file is stale.
//! Every trace line is checked against the committed schema before it is deserialised, so what
//! the parser accepts is exactly what the schema says: an unknown field anywhere (a typo such as
//! `runid` or `upto`) is refused, and a value of the wrong type is named by its path
//! (`field "input.up_to": expected an unsigned integer, found "x"`), which serde cannot do
//! inside internally tagged enums.
//!
//! The reader compiles the schema once into nodes (`Schema`) and walks a value against them;
//! it implements the keywords the generated schema uses (listed in [`KEYWORDS`]; a test checks
//! the schema uses no other), so it cannot silently skip a rule.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The committed schema, embedded so that reading a trace needs no file.
const SCHEMA: &str = include_str!("../../trace-format.schema.json");

/// The schema keywords the reader understands; the generated schema may use only these.
pub const KEYWORDS: &[&str] = &[
    "$schema",
    "$id",
    "$defs",
    "$ref",
    "title",
    "description",
    "default",
    "type",
    "format",
    "enum",
    "const",
    "oneOf",
    "anyOf",
    "properties",
    "patternProperties",
    "required",
    "additionalProperties",
    "items",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
];

/// The `patternProperties` patterns the reader understands: `^\d+$`, the keys of a map by
/// sequence number (`expect_outcomes`).
pub const PATTERNS: &[&str] = &["^\\d+$"];

/// A value that breaks the schema, in words that name the field by its path
/// (`field "input.up_to": expected ...`, `field "input.prompt" is missing`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) message: String,
    /// The field's path (`input.up_to`), or `None` when the value itself is at fault.
    pub(crate) field: Option<String>,
    /// How deep into the value the problem is (to report the branch of a union that fit best).
    depth: usize,
}

/// Where the walker is in the value: built on the stack as it descends, rendered only when a
/// problem is found, so a valid line allocates nothing for paths.
#[derive(Clone, Copy)]
enum At<'a> {
    Root,
    Field(&'a At<'a>, &'a str),
    Index(&'a At<'a>, usize),
}

impl At<'_> {
    fn render(&self) -> String {
        match self {
            At::Root => String::new(),
            At::Field(up, name) => join(&up.render(), name),
            At::Index(up, i) => format!("{}[{i}]", up.render()),
        }
    }

    fn depth(&self) -> usize {
        match self {
            At::Root => 0,
            At::Field(up, _) | At::Index(up, _) => up.depth() + 1,
        }
    }

    /// `field "<path>" <what>` (`what`: "is missing", ...), or `what` alone at the root.
    fn problem(&self, what: impl Into<String>) -> Problem {
        let (path, what) = (self.render(), what.into());
        let message = if path.is_empty() { what } else { format!("field {path:?} {what}") };
        Problem { message, field: (!path.is_empty()).then_some(path), depth: self.depth() }
    }

    /// A value of the wrong kind: `field "<path>": expected <expected>, found <value>`.
    fn wrong(&self, expected: &str, found: &Value) -> Problem {
        let (path, what) = (self.render(), format!("expected {expected}, found {}", render(found)));
        let message = if path.is_empty() { what } else { format!("field {path:?}: {what}") };
        Problem { message, field: (!path.is_empty()).then_some(path), depth: self.depth() }
    }
}

/// Index of a node in [`Schema::nodes`].
type Id = usize;

/// One compiled schema.
#[derive(Debug)]
enum Node {
    /// A `$ref` (resolved to the definition's node).
    Ref(Id),
    /// `oneOf` / `anyOf`: the value fits one branch.
    Union(Union),
    /// Everything else: type, value and object or array rules.
    Plain(Box<Plain>),
}

#[derive(Debug)]
struct Union {
    branches: Vec<Id>,
    /// For a tagged union (serde's internally tagged enum: every branch fixes one property with
    /// a `const`): that property and the branch of each of its values.
    tag: Option<(String, Vec<(Value, Id)>)>,
    /// What the union accepts, in words (for errors).
    expected: String,
}

/// Type bits: one per JSON type.
const NULL: u8 = 1;
const BOOLEAN: u8 = 2;
const INTEGER: u8 = 4;
const NUMBER: u8 = 8;
const STRING: u8 = 16;
const ARRAY: u8 = 32;
const OBJECT: u8 = 64;
const ANY: u8 = 0x7f;

#[derive(Debug)]
struct Plain {
    types: u8,
    options: Option<Vec<Value>>,
    constant: Option<Value>,
    lo: f64,
    hi: f64,
    min_len: Option<u64>,
    max_len: Option<u64>,
    properties: BTreeMap<String, Id>,
    digit_keys: Option<Id>,
    extra: Extra,
    required: Vec<String>,
    items: Option<Id>,
    /// What the schema accepts, in words: "an unsigned integer", "a string or null", ...
    expected: String,
}

/// What an object accepts beyond its listed properties.
#[derive(Debug)]
enum Extra {
    Any,
    Nothing,
    Schema(Id),
}

/// The compiled schema of trace files.
#[derive(Debug)]
pub(crate) struct Schema {
    nodes: Vec<Node>,
    defs: BTreeMap<String, Id>,
}

impl Schema {
    /// The embedded schema, compiled once per process: a constant that happens to need parsing
    /// (it holds no state, so sharing it decides nothing).
    ///
    /// # Errors
    /// When the committed file is not JSON (a broken build; the tests catch it first).
    pub(crate) fn embedded() -> Result<&'static Schema, String> {
        static COMPILED: std::sync::OnceLock<Result<Schema, String>> = std::sync::OnceLock::new();
        let compiled = COMPILED.get_or_init(|| {
            let root: Value = serde_json::from_str(SCHEMA)
                .map_err(|e| format!("the embedded trace schema is not JSON: {e}"))?;
            Ok(Schema::compile(&root))
        });
        compiled.as_ref().map_err(Clone::clone)
    }

    /// Compiles a schema document: every definition under `$defs`, `$ref`s resolved.
    fn compile(root: &Value) -> Schema {
        let empty = Map::new();
        let defs_json = root.get("$defs").and_then(Value::as_object).unwrap_or(&empty);
        let mut c = Compiler { defs_json, nodes: Vec::new(), defs: BTreeMap::new() };
        for name in defs_json.keys() {
            c.def(name);
        }
        Schema { nodes: c.nodes, defs: c.defs }
    }

    /// Checks `value` against the definition `def` (`TraceHeader` or `TraceLine`).
    pub(crate) fn check(&self, def: &str, value: &Value) -> Result<(), Problem> {
        let Some(&id) = self.defs.get(def) else {
            return Err(At::Root.problem(format!("the trace schema has no definition {def:?}")));
        };
        self.walk(id, value, &At::Root)
    }

    /// The node behind any chain of `$ref`s.
    fn target(&self, mut id: Id) -> Id {
        while let Node::Ref(next) = self.nodes[id] {
            id = next;
        }
        id
    }

    fn walk(&self, id: Id, value: &Value, at: &At<'_>) -> Result<(), Problem> {
        match &self.nodes[self.target(id)] {
            Node::Ref(_) => Ok(()), // resolved by `target`
            Node::Union(u) => self.union(u, value, at),
            Node::Plain(p) => self.plain(p, value, at),
        }
    }

    /// A tagged union is decided by its tag, so the error is the chosen variant's own;
    /// otherwise only branches whose type fits are tried (an `Option` is `anyOf [T, null]`),
    /// the first that fits wins, and the error is that of the branch that got furthest.
    fn union(&self, u: &Union, value: &Value, at: &At<'_>) -> Result<(), Problem> {
        if let (Some((tag, by_value)), Value::Object(fields)) = (&u.tag, value) {
            let here = At::Field(at, tag);
            let Some(given) = fields.get(tag) else { return Err(here.problem("is missing")) };
            return match by_value.iter().find(|(v, _)| v == given) {
                Some((_, id)) => self.walk(*id, value, at),
                None => {
                    let names: Vec<String> = by_value.iter().map(|(v, _)| render(v)).collect();
                    wrong(&here, &format!("one of {}", names.join(", ")), given)
                }
            };
        }
        let mut best: Option<Problem> = None;
        for &b in u.branches.iter().filter(|b| self.fits_type(**b, value)) {
            match self.walk(b, value, at) {
                Ok(()) => return Ok(()),
                Err(p) if best.as_ref().is_none_or(|q| p.depth > q.depth) => best = Some(p),
                Err(_) => {}
            }
        }
        match best {
            Some(p) if p.depth > at.depth() => Err(p),
            _ => wrong(at, &u.expected, value),
        }
    }

    fn fits_type(&self, id: Id, value: &Value) -> bool {
        match &self.nodes[self.target(id)] {
            Node::Plain(p) => p.types & type_bit(value) != 0,
            _ => true,
        }
    }

    fn plain(&self, p: &Plain, value: &Value, at: &At<'_>) -> Result<(), Problem> {
        if p.types & type_bit(value) == 0 {
            return wrong(at, &p.expected, value);
        }
        if let Some(options) = &p.options
            && !options.contains(value)
        {
            return wrong(at, &p.expected, value);
        }
        if let Some(c) = &p.constant
            && c != value
        {
            return wrong(at, &p.expected, value);
        }
        if let Some(n) = value.as_f64()
            && (n < p.lo || n > p.hi)
        {
            return wrong(at, &format!("a number from {} to {}", p.lo, p.hi), value);
        }
        if let Some(s) = value.as_str() {
            let n = s.chars().count() as u64;
            if p.min_len.is_some_and(|m| n < m) || p.max_len.is_some_and(|m| n > m) {
                return wrong(at, &p.expected, value);
            }
        }
        match value {
            Value::Object(fields) => self.object(p, fields, at),
            Value::Array(items) => match p.items {
                Some(item) => {
                    for (i, v) in items.iter().enumerate() {
                        self.walk(item, v, &At::Index(at, i))?;
                    }
                    Ok(())
                }
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    fn object(&self, p: &Plain, fields: &Map<String, Value>, at: &At<'_>) -> Result<(), Problem> {
        for (name, v) in fields {
            let here = At::Field(at, name);
            let listed = p.properties.get(name).copied().or_else(|| {
                p.digit_keys
                    .filter(|_| !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
            });
            match (listed, &p.extra) {
                (Some(id), _) | (None, &Extra::Schema(id)) => self.walk(id, v, &here)?,
                (None, Extra::Nothing) => return Err(unknown(&here, name, p)),
                (None, Extra::Any) => {}
            }
        }
        // After the unknown fields: a misspelt field is reported as itself, not as the field
        // it was meant to be.
        if let Some(name) = p.required.iter().find(|name| !fields.contains_key(*name)) {
            return Err(At::Field(at, name).problem("is missing"));
        }
        Ok(())
    }
}

/// Builds [`Schema`] nodes from the JSON schema.
struct Compiler<'a> {
    defs_json: &'a Map<String, Value>,
    nodes: Vec<Node>,
    defs: BTreeMap<String, Id>,
}

impl Compiler<'_> {
    /// The node of a definition, compiled on first use (a placeholder first, so a definition
    /// that refers to itself resolves).
    fn def(&mut self, name: &str) -> Id {
        if let Some(&id) = self.defs.get(name) {
            return id;
        }
        let id = self.push(Node::Ref(usize::MAX));
        self.defs.insert(name.to_owned(), id);
        let body = match self.defs_json.get(name) {
            Some(json) => self.node(json),
            None => self.push(Node::Plain(Box::new(plain(&Value::Bool(true))))),
        };
        self.nodes[id] = Node::Ref(body);
        id
    }

    fn push(&mut self, node: Node) -> Id {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn node(&mut self, json: &Value) -> Id {
        if let Some(r) = json.get("$ref").and_then(Value::as_str) {
            let name = r.strip_prefix("#/$defs/").unwrap_or(r).to_owned();
            let target = self.def(&name);
            return self.push(Node::Ref(target));
        }
        if let Some(branches) = json.get("oneOf").or_else(|| json.get("anyOf")) {
            let list: Vec<&Value> =
                branches.as_array().map(|b| b.iter().collect()).unwrap_or_default();
            let resolved: Vec<&Value> = list.iter().map(|b| self.resolve_json(b)).collect();
            let ids: Vec<Id> = list.iter().map(|b| self.node(b)).collect();
            let tag = tag_of(&resolved).map(|key| {
                let by_value = resolved
                    .iter()
                    .zip(&ids)
                    .filter_map(|(b, id)| tag_const(b, key).map(|v| (v.clone(), *id)))
                    .collect();
                (key.to_owned(), by_value)
            });
            let what: Vec<String> = resolved.iter().map(|b| expected(b)).collect();
            let scalars = resolved.iter().all(|b| b.get("const").is_some());
            let expected =
                if scalars { format!("one of {}", what.join(", ")) } else { what.join(" or ") };
            return self.push(Node::Union(Union { branches: ids, tag, expected }));
        }
        let mut p = plain(json);
        if let Some(props) = json.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                let id = self.node(v);
                p.properties.insert(k.clone(), id);
            }
        }
        if let Some(digits) = json.get("patternProperties").and_then(|pp| pp.get(PATTERNS[0])) {
            p.digit_keys = Some(self.node(digits));
        }
        match json.get("additionalProperties") {
            Some(Value::Bool(false)) => p.extra = Extra::Nothing,
            Some(extra) if extra.is_object() => p.extra = Extra::Schema(self.node(extra)),
            _ => {}
        }
        if let Some(items) = json.get("items") {
            p.items = Some(self.node(items));
        }
        self.push(Node::Plain(Box::new(p)))
    }

    /// A branch's JSON behind its `$ref`, to read its tag and type while compiling.
    fn resolve_json<'b>(&self, json: &'b Value) -> &'b Value
    where
        Self: 'b,
    {
        match json.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
            Some(name) => self.defs_json.get(name).map_or(json, |d| self.resolve_json(d)),
            None => json,
        }
    }
}

/// The rules of a schema that need no other node.
fn plain(json: &Value) -> Plain {
    let types = match json.get("type") {
        Some(Value::String(t)) => type_bits(t),
        Some(Value::Array(ts)) => {
            ts.iter().filter_map(Value::as_str).map(type_bits).fold(0, |a, b| a | b)
        }
        _ => ANY,
    };
    let (lo, hi) = format_range(json.get("format").and_then(Value::as_str));
    let num = |k: &str| json.get(k).and_then(Value::as_f64);
    Plain {
        types,
        options: json.get("enum").and_then(Value::as_array).cloned(),
        constant: json.get("const").cloned(),
        lo: num("minimum").map_or(lo, |m| lo.max(m)),
        hi: num("maximum").map_or(hi, |m| hi.min(m)),
        min_len: json.get("minLength").and_then(Value::as_u64),
        max_len: json.get("maxLength").and_then(Value::as_u64),
        properties: BTreeMap::new(),
        digit_keys: None,
        extra: Extra::Any,
        required: json
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default(),
        items: None,
        expected: expected(json),
    }
}

fn type_bits(t: &str) -> u8 {
    match t {
        "null" => NULL,
        "boolean" => BOOLEAN,
        // An integer is also a number.
        "integer" => INTEGER,
        "number" => NUMBER | INTEGER,
        "string" => STRING,
        "array" => ARRAY,
        "object" => OBJECT,
        _ => 0,
    }
}

fn type_bit(v: &Value) -> u8 {
    match v {
        Value::Null => NULL,
        Value::Bool(_) => BOOLEAN,
        Value::Number(n) if n.is_i64() || n.is_u64() => INTEGER,
        Value::Number(_) => NUMBER,
        Value::String(_) => STRING,
        Value::Array(_) => ARRAY,
        Value::Object(_) => OBJECT,
    }
}

/// The property every branch of a union fixes with `const` (serde's tag), if there is one. A
/// branch that is itself a union (a newtype variant around a tagged enum) fixes it when all of
/// its own branches fix it to the same value.
fn tag_of<'a>(branches: &[&'a Value]) -> Option<&'a str> {
    let mut first = *branches.first()?;
    while first.get("properties").is_none() {
        first = first.get("oneOf")?.as_array()?.first()?;
    }
    let candidates = first.get("properties")?.as_object()?;
    candidates
        .iter()
        .filter(|(_, s)| s.get("const").is_some())
        .map(|(k, _)| k.as_str())
        .find(|k| branches.iter().all(|b| tag_const(b, k).is_some()))
}

/// The value a branch fixes its tag `key` to (see [`tag_of`]).
fn tag_const<'a>(branch: &'a Value, key: &str) -> Option<&'a Value> {
    if let Some(c) = branch.get("properties").and_then(|p| p.get(key)).and_then(|s| s.get("const"))
    {
        return Some(c);
    }
    let nested = branch.get("oneOf")?.as_array()?;
    let first = tag_const(nested.first()?, key)?;
    nested.iter().all(|b| tag_const(b, key) == Some(first)).then_some(first)
}

/// The range of an integer format, as schemars writes them.
fn format_range(format: Option<&str>) -> (f64, f64) {
    match format {
        Some("uint8") => (0.0, f64::from(u8::MAX)),
        Some("uint16") => (0.0, f64::from(u16::MAX)),
        Some("uint32") => (0.0, f64::from(u32::MAX)),
        Some("uint64" | "uint") => (0.0, u64::MAX as f64),
        _ => (f64::NEG_INFINITY, f64::INFINITY),
    }
}

/// What a schema accepts, in words: "an unsigned integer", "a string or null", `"fold"`, ...
fn expected(schema: &Value) -> String {
    if let Some(c) = schema.get("const") {
        return render(c);
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        let names: Vec<String> = options.iter().map(render).collect();
        return format!("one of {}", names.join(", "));
    }
    let unsigned =
        schema.get("format").and_then(Value::as_str).is_some_and(|f| f.starts_with("uint"))
            || schema.get("minimum").and_then(Value::as_f64).is_some_and(|m| m >= 0.0);
    let word = |t: &str| match t {
        "integer" if unsigned => "an unsigned integer".to_owned(),
        "integer" => "an integer".to_owned(),
        "number" => "a number".to_owned(),
        "string" => match schema.get("minLength").and_then(Value::as_u64) {
            Some(n) if schema.get("maxLength").and_then(Value::as_u64) == Some(n) => {
                format!("a string of {n} characters")
            }
            _ => "a string".to_owned(),
        },
        "boolean" => "true or false".to_owned(),
        "array" => "an array".to_owned(),
        "object" => "an object".to_owned(),
        "null" => "null".to_owned(),
        other => other.to_owned(),
    };
    match schema.get("type") {
        Some(Value::String(t)) => word(t),
        Some(Value::Array(ts)) => {
            ts.iter().filter_map(Value::as_str).map(word).collect::<Vec<_>>().join(" or ")
        }
        _ => "something else".to_owned(),
    }
}

/// A value as an error message shows it: scalars as JSON (long strings cut), containers by kind.
fn render(v: &Value) -> String {
    match v {
        Value::String(s) if s.chars().count() > 40 => {
            let cut: String = s.chars().take(40).collect();
            format!("{}...", Value::String(cut))
        }
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
        other => other.to_string(),
    }
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_owned() } else { format!("{path}.{field}") }
}

fn wrong<T>(at: &At<'_>, expected: &str, found: &Value) -> Result<T, Problem> {
    Err(at.wrong(expected, found))
}

fn unknown(at: &At<'_>, name: &str, p: &Plain) -> Problem {
    if p.properties.is_empty() {
        return at.problem("is not a sequence number (a key of digits)");
    }
    let known: Vec<&str> = p.properties.keys().map(String::as_str).collect();
    let hint = if name == "mutant" && at.render() == "config.mutant" {
        " (a test-only field: replay with a build that has the core's `mutants` feature)"
    } else {
        ""
    };
    at.problem(format!("is not a known field; known here: {}{hint}", known.join(", ")))
}

/// The schema of trace files, generated from the types: what `core/trace-format.schema.json`
/// must hold (`tests/traces.rs` compares them; `TURNSTILE_BLESS=1` rewrites the file).
#[cfg(feature = "schema")]
#[must_use]
pub fn generate() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let header = generator.subschema_for::<crate::trace::format::TraceHeader>();
    let line = generator.subschema_for::<crate::trace::format::TraceLine>();
    // The process driver's replies: not a line of a trace file, so under $defs only.
    let _reply = generator.subschema_for::<crate::trace::reply::DriverReply>();
    let mut defs: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    let originals = defs.clone();
    for def in defs.values_mut() {
        inline_tagged_newtypes(def, &originals);
    }
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "turnstile-trace-v1",
        "title": "turnstile trace, version 1 (JSON Lines)",
        "description": "A trace file is JSON Lines: the first non-blank line is a TraceHeader, every later non-blank line is a TraceLine (both under $defs; validate each line against its definition). The process driver (turnstile-driver) reads the same lines and writes one DriverReply (under $defs) for each. Generated from the Rust types of turnstile-core; see docs/trace-format.md.",
        "$defs": defs,
        "anyOf": [header, line],
    })
}

/// serde writes an internally tagged newtype variant (`Input::Submit(Submit)`) as the inner
/// value with the tag added. schemars describes it in two ways that a strict validator reads
/// differently from serde: a `$ref` to the inner struct beside the tag's `properties` (the
/// inner struct then refuses the tag as unknown), or the tag's `properties` beside the inner
/// enum's variants, each left open to unknown fields so the tag can pass. The variant gets a
/// copy of the inner schema with the tag merged into every object of it, and every object is
/// closed, so the schema means what serde does.
#[cfg(feature = "schema")]
fn inline_tagged_newtypes(schema: &mut Value, defs: &Map<String, Value>) {
    let Some(branches) = schema.get_mut("oneOf").and_then(Value::as_array_mut) else { return };
    for b in branches.iter_mut() {
        let Some(tag) = b.get("properties").and_then(Value::as_object).cloned() else { continue };
        let description = b.get("description").cloned();
        let mut inner = match (b.get("$ref").cloned(), b.get("oneOf").cloned()) {
            (Some(target), _) => resolve_copy(&target, defs),
            (None, Some(variants)) => serde_json::json!({ "oneOf": variants }),
            (None, None) => continue, // a struct or unit variant: schemars got it right
        };
        add_tag(&mut inner, tag, defs);
        if let (Some(d), Some(obj)) = (description, inner.as_object_mut()) {
            obj.insert("description".to_owned(), d);
        }
        *b = inner;
    }
}

#[cfg(feature = "schema")]
fn resolve_copy(reference: &Value, defs: &Map<String, Value>) -> Value {
    let name = reference.as_str().and_then(|r| r.strip_prefix("#/$defs/")).unwrap_or("");
    let mut target = defs.get(name).cloned().unwrap_or(Value::Bool(true));
    // A `$ref` alone with a description (a transparent wrapper): follow it.
    while let Some(next) = target.get("$ref").cloned() {
        let description = target.get("description").cloned();
        target = resolve_copy(&next, defs);
        if let (Some(d), Some(obj)) = (description, target.as_object_mut()) {
            obj.insert("description".to_owned(), d);
        }
    }
    target
}

/// Adds the tag's properties (and makes them required) in every object of `schema`, and
/// closes each object to unknown fields (every type of the trace refuses them).
#[cfg(feature = "schema")]
fn add_tag(schema: &mut Value, tag: Map<String, Value>, defs: &Map<String, Value>) {
    if let Some(branches) = schema.get_mut("oneOf").and_then(Value::as_array_mut) {
        for b in branches.iter_mut() {
            if let Some(r) = b.get("$ref").cloned() {
                *b = resolve_copy(&r, defs);
            }
            add_tag(b, tag.clone(), defs);
        }
        return;
    }
    let Some(obj) = schema.as_object_mut() else { return };
    let props = obj.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    if let Some(props) = props.as_object_mut() {
        for (k, v) in &tag {
            props.insert(k.clone(), v.clone());
        }
    }
    let required = obj.entry("required").or_insert_with(|| Value::Array(Vec::new()));
    if let Some(required) = required.as_array_mut() {
        for k in tag.keys() {
            if !required.iter().any(|r| r == k.as_str()) {
                required.insert(0, Value::String(k.clone()));
            }
        }
    }
    obj.insert("additionalProperties".to_owned(), Value::Bool(false));
}
