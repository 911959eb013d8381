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
//! The walker implements the keywords the generated schema uses (listed in [`KEYWORDS`]; a
//! test checks the schema uses no other), so it cannot silently skip a rule.

use serde_json::{Map, Value};

/// The committed schema, embedded so that reading a trace needs no file.
const SCHEMA: &str = include_str!("../../trace-format.schema.json");

/// The schema keywords the walker understands; the generated schema may use only these.
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

/// The `patternProperties` patterns the walker understands: `^\d+$`, the keys of a map by
/// sequence number (`expect_outcomes`).
pub const PATTERNS: &[&str] = &["^\\d+$"];

/// A value that breaks the schema: where (a path such as `input.call.seq`) and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Problem {
    pub(crate) path: String,
    pub(crate) message: String,
}

/// The parsed schema.
pub(crate) struct Schema {
    root: Value,
}

impl Schema {
    /// The embedded schema.
    ///
    /// # Errors
    /// When the committed file is not JSON (a broken build; the tests catch it first).
    pub(crate) fn embedded() -> Result<Schema, String> {
        serde_json::from_str(SCHEMA)
            .map(|root| Schema { root })
            .map_err(|e| format!("the embedded trace schema is not JSON: {e}"))
    }

    /// Checks `value` against the definition `def` (`TraceHeader` or `TraceLine`).
    pub(crate) fn check(&self, def: &str, value: &Value) -> Result<(), Problem> {
        let schema = self.definition(def).ok_or_else(|| Problem {
            path: String::new(),
            message: format!("the trace schema has no definition {def:?}"),
        })?;
        self.walk(schema, value, "")
    }

    fn definition(&self, name: &str) -> Option<&Value> {
        self.root.get("$defs")?.get(name)
    }

    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                r.strip_prefix("#/$defs/").and_then(|n| self.definition(n)).unwrap_or(schema)
            }
            None => schema,
        }
    }

    fn walk(&self, schema: &Value, value: &Value, path: &str) -> Result<(), Problem> {
        if schema.get("$ref").is_some() {
            // `$ref` applies together with its siblings (a description, a default: nothing
            // that constrains; the generator leaves no other beside it).
            return self.walk(self.resolve(schema), value, path);
        }
        if let Some(branches) = schema.get("oneOf").or_else(|| schema.get("anyOf")) {
            return self.branches(branches, value, path);
        }
        if let Some(types) = schema.get("type") {
            let ok = match types {
                Value::String(t) => is_type(t, value),
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| is_type(t, value)),
                _ => true,
            };
            if !ok {
                return wrong(path, &expected(schema), value);
            }
        }
        if let Some(options) = schema.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            let names: Vec<String> = options.iter().map(render).collect();
            return wrong(path, &format!("one of {}", names.join(", ")), value);
        }
        if let Some(c) = schema.get("const")
            && c != value
        {
            return wrong(path, &render(c), value);
        }
        self.bounds(schema, value, path)?;
        match value {
            Value::Object(fields) => self.object(schema, fields, path),
            Value::Array(items) => match schema.get("items") {
                Some(item) => {
                    for (i, v) in items.iter().enumerate() {
                        self.walk(item, v, &format!("{path}[{i}]"))?;
                    }
                    Ok(())
                }
                None => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// `oneOf` / `anyOf`. A tagged union (every branch an object with a `const` for the same
    /// property, as serde's internally tagged enums are) is decided by its tag, so the error is
    /// the chosen variant's own; otherwise the first branch that fits wins, and the error is
    /// that of the branch that got furthest.
    fn branches(&self, branches: &Value, value: &Value, path: &str) -> Result<(), Problem> {
        let branches: Vec<&Value> = branches
            .as_array()
            .map(|b| b.iter().map(|s| self.resolve(s)).collect())
            .unwrap_or_default();
        if let Some(tag) = tag_of(&branches)
            && let Value::Object(fields) = value
        {
            let at = join(path, tag);
            let Some(given) = fields.get(tag) else {
                return Err(Problem { path: at, message: "is missing".to_owned() });
            };
            return match branches.iter().find(|b| tag_const(b, tag) == Some(given)) {
                Some(b) => self.walk(b, value, path),
                None => {
                    let names: Vec<String> =
                        branches.iter().filter_map(|b| tag_const(b, tag)).map(render).collect();
                    wrong(&at, &format!("one of {}", names.join(", ")), given)
                }
            };
        }
        let mut best: Option<Problem> = None;
        for b in &branches {
            match self.walk(b, value, path) {
                Ok(()) => return Ok(()),
                Err(p) => {
                    if best.as_ref().is_none_or(|q| p.path.len() > q.path.len()) {
                        best = Some(p);
                    }
                }
            }
        }
        match best {
            Some(p) if p.path.len() > path.len() => Err(p),
            _ => {
                let what: Vec<String> = branches.iter().map(|b| expected(b)).collect();
                let scalars = branches.iter().all(|b| b.get("const").is_some());
                let what =
                    if scalars { format!("one of {}", what.join(", ")) } else { what.join(" or ") };
                wrong(path, &what, value)
            }
        }
    }

    fn object(
        &self,
        schema: &Value,
        fields: &Map<String, Value>,
        path: &str,
    ) -> Result<(), Problem> {
        let empty = Map::new();
        let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
        let patterned = |name: &str| {
            let patterns = schema.get("patternProperties").and_then(Value::as_object)?;
            patterns.iter().find(|(p, _)| matches_pattern(p, name)).map(|(_, s)| s)
        };
        for (name, v) in fields {
            let at = join(path, name);
            match (
                properties.get(name).or_else(|| patterned(name)),
                schema.get("additionalProperties"),
            ) {
                (Some(s), _) => self.walk(s, v, &at)?,
                (None, Some(Value::Bool(false))) => return Err(unknown(at, name, properties)),
                (None, Some(extra)) if extra.is_object() => self.walk(extra, v, &at)?,
                (None, _) => {}
            }
        }
        // After the unknown fields: a misspelt field is reported as itself, not as the field
        // it was meant to be.
        for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            if let Some(name) = name.as_str()
                && !fields.contains_key(name)
            {
                return Err(Problem { path: join(path, name), message: "is missing".to_owned() });
            }
        }
        Ok(())
    }

    fn bounds(&self, schema: &Value, value: &Value, path: &str) -> Result<(), Problem> {
        let num = |k: &str| schema.get(k).and_then(Value::as_f64);
        let len = |k: &str| schema.get(k).and_then(Value::as_u64);
        if let Some(n) = value.as_f64() {
            let (lo, hi) = format_range(schema.get("format").and_then(Value::as_str));
            let lo = num("minimum").map_or(lo, |m| lo.max(m));
            let hi = num("maximum").map_or(hi, |m| hi.min(m));
            if n < lo || n > hi {
                return wrong(path, &format!("a number from {lo} to {hi}"), value);
            }
        }
        if let Some(s) = value.as_str() {
            let n = s.chars().count() as u64;
            if len("minLength").is_some_and(|m| n < m) || len("maxLength").is_some_and(|m| n > m) {
                return wrong(path, &expected(schema), value);
            }
        }
        Ok(())
    }
}

/// Whether `key` matches one of [`PATTERNS`] (any other pattern matches nothing: the schema
/// test refuses patterns the walker does not implement).
fn matches_pattern(pattern: &str, key: &str) -> bool {
    match pattern {
        "^\\d+$" => !key.is_empty() && key.bytes().all(|b| b.is_ascii_digit()),
        _ => false,
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

fn is_type(t: &str, v: &Value) -> bool {
    match t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
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
        _ => match schema.get("const") {
            Some(c) => render(c),
            None => "something else".to_owned(),
        },
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

fn wrong<T>(path: &str, expected: &str, found: &Value) -> Result<T, Problem> {
    let message = format!(": expected {expected}, found {}", render(found));
    Err(Problem { path: path.to_owned(), message })
}

fn unknown(path: String, name: &str, properties: &Map<String, Value>) -> Problem {
    if properties.is_empty() {
        return Problem { path, message: "is not a sequence number (a key of digits)".to_owned() };
    }
    let mut known: Vec<&str> = properties.keys().map(String::as_str).collect();
    known.sort_unstable();
    let hint = if name == "mutant" && path == "config.mutant" {
        " (a test-only field: replay with a build that has the core's `mutants` feature)"
    } else {
        ""
    };
    let message = if known.is_empty() {
        format!("is not a known field: nothing is allowed here{hint}")
    } else {
        format!("is not a known field; known here: {}{hint}", known.join(", "))
    };
    Problem { path, message }
}

/// The schema of trace files, generated from the types: what `core/trace-format.schema.json`
/// must hold (`tests/traces.rs` compares them; `TURNSTILE_BLESS=1` rewrites the file).
#[cfg(feature = "schema")]
#[must_use]
pub fn generate() -> Value {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let header = generator.subschema_for::<crate::trace::TraceHeader>();
    let line = generator.subschema_for::<crate::trace::TraceLine>();
    let mut defs: Map<String, Value> = generator.take_definitions(true).into_iter().collect();
    let originals = defs.clone();
    for def in defs.values_mut() {
        inline_tagged_newtypes(def, &originals);
    }
    serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "turnstile-trace-v1",
        "title": "turnstile trace, version 1 (JSON Lines)",
        "description": "A trace file is JSON Lines: the first non-blank line is a TraceHeader, every later non-blank line is a TraceLine (both under $defs; validate each line against its definition). Generated from the Rust types of turnstile-core; see docs/trace-format.md.",
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
