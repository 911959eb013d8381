//! Lenient arguments (SPEC 9 "Tools"): every built-in tool reads its call's arguments through
//! [`parse`], which forgives, against the tool's own JSON schema ([`Tool::definition`]), the
//! slips that models trained on other agents make and that cannot change what the call does:
//!
//! - `file_path` is read as `path` when the schema has `path` (and no `file_path`); a call that
//!   sends both is an error, since either could be the one meant;
//! - a field the schema closes out (`"additionalProperties": false`) is ignored, and the result
//!   names it on a first line: ``(ignored unknown field `description`)``, also when the call
//!   fails;
//! - a number sent as a string (`"limit": "20"`) is read as the number where the schema asks
//!   for an integer or a number, when the whole string is one (`"twenty"` stays an error);
//! - `null` for a field that is not required is read as the field left out.
//!
//! Everything else the schema says is checked, and the result the model reads names the field:
//! a required field left out (``field `path` is missing``), a wrong type, a number below the
//! schema's `minimum`, an array shorter than its `minItems`. Items of arrays are counted from 1.
//! A `maximum` is not checked here: the tools take a larger number as their most (a `limit`,
//! a timeout), as their descriptions say.
//!
//! The permission gate judges a call by the same reading ([`canonical`]), so a rule or a hook
//! that matches `path` cannot be dodged by sending `file_path`, nor by a closed-out field.
//!
//! [`Tool::definition`]: turnstile_host::Tool::definition

use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};
use turnstile_core::ToolOutput;
use turnstile_wire::ToolDef;

/// The field names read as another: `(sent, read as)`.
pub const ALIASES: [(&str, &str); 1] = [("file_path", "path")];

/// Characters of a wrong value quoted in an error.
const QUOTE_MAX: usize = 40;

/// The fields a call sent that its tool ignored, each described for the model
/// (``unknown field `description` ``): by name within an object, an object's own before
/// those of its items.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ignored(Vec<String>);

impl Ignored {
    /// The descriptions, in their order.
    #[must_use]
    pub fn fields(&self) -> &[String] {
        &self.0
    }

    /// Whether nothing was ignored.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `output` with one line ``(ignored unknown field `x`)`` per ignored field before its
    /// content; its error flag and stop are kept. Nothing ignored: `output` unchanged.
    #[must_use]
    pub fn annotate(&self, output: ToolOutput) -> ToolOutput {
        if self.0.is_empty() {
            return output;
        }
        let notes: String = self.0.iter().map(|f| format!("(ignored {f})\n")).collect();
        ToolOutput { content: format!("{notes}{}", output.content), ..output }
    }
}

/// A call's arguments as its tool reads them.
#[derive(Clone, Debug, PartialEq)]
pub struct Normalized {
    /// The arguments with the aliases applied, closed-out fields and `null`s of optional
    /// fields removed, and numbers sent as strings made numbers.
    pub value: Map<String, Value>,
    /// What was removed because the schema closes it out.
    pub ignored: Ignored,
}

/// Arguments that cannot be read: the reason names the field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid {
    /// What is wrong, naming the field (``field `path` is missing``).
    pub reason: String,
    /// What was ignored before the reading stopped.
    pub ignored: Ignored,
}

/// Reads `input` (JSON text) against an object `schema`, applying the rules of this module.
///
/// # Errors
/// The input is not a JSON object, two aliases of one field were sent, or a field breaks the
/// schema (missing, wrong type, below its minimum, too few items); the first such field.
pub fn normalize(schema: &Value, input: &str) -> Result<Normalized, Invalid> {
    let mut ignored = Vec::new();
    let reading = match serde_json::from_str::<Value>(input) {
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
        Ok(Value::Object(map)) => object(schema, map, &[], &mut ignored),
        Ok(other) => Err(format!("the arguments must be a JSON object, got {}", quote(&other))),
    };
    match reading {
        Ok(value) => Ok(Normalized { value, ignored: Ignored(ignored) }),
        Err(reason) => Err(Invalid { reason, ignored: Ignored(ignored) }),
    }
}

/// The arguments of a call to the tool `def` describes, read by [`normalize`] into `T`.
///
/// # Errors
/// The result the model reads instead: ``invalid arguments for `view`: field `path` is
/// missing``, with the ignored fields named ([`Ignored::annotate`]).
pub fn parse<T: DeserializeOwned>(def: &ToolDef, input: &str) -> Result<(T, Ignored), ToolOutput> {
    let invalid = |reason: &str, ignored: &Ignored| {
        ignored
            .annotate(ToolOutput::error(format!("invalid arguments for `{}`: {reason}", def.name)))
    };
    let n = normalize(&def.input_schema, input).map_err(|e| invalid(&e.reason, &e.ignored))?;
    // The schema and the struct describe the same fields; this error would be a tool's bug,
    // and says what serde found all the same.
    match serde_json::from_value(Value::Object(n.value)) {
        Ok(args) => Ok((args, n.ignored)),
        Err(e) => Err(invalid(&e.to_string(), &n.ignored)),
    }
}

/// A call run by `tool` on its arguments read by [`parse`] into `T`: the tool's result, or the
/// error of arguments that cannot be read, with the ignored fields named on either.
pub fn lenient<T: DeserializeOwned>(
    def: &ToolDef,
    input: &str,
    tool: impl FnOnce(T) -> Result<ToolOutput, ToolOutput>,
) -> ToolOutput {
    match parse(def, input) {
        Ok((args, ignored)) => ignored.annotate(tool(args).unwrap_or_else(|e| e)),
        Err(invalid) => invalid,
    }
}

/// The arguments as the tool whose schema this is reads them ([`normalize`]), as JSON text;
/// `input` unchanged when they cannot be read (a built-in tool then refuses the call).
///
/// This is what the permission gate matches rules against and shows hooks, so that a call is
/// judged by what it does, not by how it was spelled.
#[must_use]
pub fn canonical(schema: &Value, input: &str) -> String {
    normalize(schema, input)
        .map_or_else(|_| input.to_owned(), |n| Value::Object(n.value).to_string())
}

/// One step from the arguments to a field: a key, or an item of an array (from 1).
#[derive(Clone, Debug)]
enum Step {
    Key(String),
    Item(usize),
}

/// The field at `at` for the model: ``field `old_string` of item 2 of field `edits` ``.
fn describe(at: &[Step]) -> String {
    let Some((last, rest)) = at.split_last() else { return "the arguments".into() };
    let this = match last {
        Step::Key(k) => format!("field `{k}`"),
        Step::Item(i) => format!("item {i}"),
    };
    if rest.is_empty() { this } else { format!("{this} of {}", describe(rest)) }
}

fn child(at: &[Step], step: Step) -> Vec<Step> {
    let mut path = at.to_vec();
    path.push(step);
    path
}

/// An object read against an object schema (see the module's rules, in their order).
fn object(
    schema: &Value,
    mut map: Map<String, Value>,
    at: &[Step],
    ignored: &mut Vec<String>,
) -> Result<Map<String, Value>, String> {
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut conflict = None;
    for (alias, name) in ALIASES {
        if !properties.contains_key(name) || properties.contains_key(alias) {
            continue;
        }
        if let Some(value) = map.remove(alias) {
            if map.contains_key(name) {
                // Either could be the one meant: refuse rather than guess.
                let (a, n) =
                    (child(at, Step::Key(alias.into())), child(at, Step::Key(name.into())));
                conflict.get_or_insert(format!(
                    "{} and {} were both given; send only `{name}`",
                    describe(&n),
                    describe(&a)
                ));
            } else {
                map.insert(name.to_owned(), value);
            }
        }
    }
    if schema.get("additionalProperties") == Some(&Value::Bool(false)) {
        // By name, whatever order the map keeps (`preserve_order` may be on in a build).
        let mut unknown: Vec<String> =
            map.keys().filter(|k| !properties.contains_key(*k)).cloned().collect();
        unknown.sort();
        for key in unknown {
            map.remove(&key);
            ignored.push(format!("unknown {}", describe(&child(at, Step::Key(key)))));
        }
    }
    if let Some(conflict) = conflict {
        return Err(conflict);
    }
    map.retain(|key, value| !value.is_null() || required.contains(&key.as_str()));
    if let Some(missing) = required.iter().find(|r| !map.contains_key(**r)) {
        return Err(format!("{} is missing", describe(&child(at, Step::Key((*missing).into())))));
    }
    for (key, value) in &mut map {
        if let Some(property) = properties.get(key) {
            field(property, value, &child(at, Step::Key(key.clone())), ignored)?;
        }
    }
    Ok(map)
}

/// One value read against its schema: a number from a string, then its type, minimum, items.
fn field(
    schema: &Value,
    value: &mut Value,
    at: &[Step],
    ignored: &mut Vec<String>,
) -> Result<(), String> {
    let types = types(schema);
    if types.is_empty() {
        return Ok(());
    }
    if let Value::String(text) = value
        && !types.contains(&"string")
        && let Some(number) = number_in(text, &types)
    {
        *value = Value::Number(number);
    }
    if !types.iter().any(|t| is(t, value)) {
        let expected: Vec<String> = types.iter().map(|t| article(t)).collect();
        return Err(format!(
            "{} must be {}, got {}",
            describe(at),
            expected.join(" or "),
            quote(value)
        ));
    }
    if let (Some(min), Some(n)) = (schema.get("minimum"), value.as_f64())
        && min.as_f64().is_some_and(|min| n < min)
    {
        return Err(format!("{} must be at least {min}, got {n}", describe(at)));
    }
    match value {
        Value::Object(map) => {
            *map = object(schema, std::mem::take(map), at, ignored)?;
        }
        Value::Array(items) => {
            let least = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            if (items.len() as u64) < least {
                let s = if least == 1 { "" } else { "s" };
                return Err(format!(
                    "{} must have at least {least} item{s}, got {}",
                    describe(at),
                    items.len()
                ));
            }
            if let Some(item) = schema.get("items") {
                for (i, value) in items.iter_mut().enumerate() {
                    field(item, value, &child(at, Step::Item(i + 1)), ignored)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// The schema's `type`, one or several; empty when it says none (anything goes).
fn types(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    }
}

/// The number a string is, when the whole string is one of a type the schema accepts.
fn number_in(text: &str, types: &[&str]) -> Option<Number> {
    let whole = text.parse::<i64>().map(Number::from).ok();
    let whole = whole.or_else(|| text.parse::<u64>().map(Number::from).ok());
    if types.contains(&"integer") && whole.is_some() {
        return whole;
    }
    if !types.contains(&"number") {
        return None;
    }
    // `f64` also reads "inf" and "NaN", which JSON has no number for.
    whole.or_else(|| text.parse::<f64>().ok().and_then(Number::from_f64))
}

/// Whether `value` is of the JSON schema type `t` (an unknown type name accepts anything).
fn is(t: &str, value: &Value) -> bool {
    match t {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "null" => value.is_null(),
        _ => true,
    }
}

fn article(t: &str) -> String {
    match t {
        "integer" | "array" | "object" => format!("an {t}"),
        "boolean" => "a boolean (true or false)".into(),
        "null" => "null".into(),
        _ => format!("a {t}"),
    }
}

/// A wrong value for an error: its kind, and its text when short.
fn quote(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".into(),
        Value::Bool(b) => return format!("the boolean {b}"),
        Value::Number(n) => return format!("the number {n}"),
        Value::String(_) => "the string",
        Value::Array(_) => return "an array".into(),
        Value::Object(_) => return "an object".into(),
    };
    let text = value.to_string();
    if text.chars().count() <= QUOTE_MAX {
        format!("{kind} {text}")
    } else {
        let cut: String = text.chars().take(QUOTE_MAX).collect();
        format!("{kind} {cut}…")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1},
                "ratio": {"type": "number"},
                "all": {"type": "boolean"},
                "edits": {"type": "array", "minItems": 1, "items": {
                    "type": "object",
                    "properties": {"old": {"type": "string"}},
                    "required": ["old"],
                    "additionalProperties": false,
                }},
            },
            "required": ["path"],
            "additionalProperties": false,
        })
    }

    fn read(input: Value) -> Result<Value, String> {
        normalize(&schema(), &input.to_string())
            .map(|n| Value::Object(n.value))
            .map_err(|e| e.reason)
    }

    #[test]
    fn file_path_is_path_unless_both_are_sent() {
        assert_eq!(read(json!({"file_path": "a.rs"})), Ok(json!({"path": "a.rs"})));
        assert_eq!(
            read(json!({"file_path": "a.rs", "path": "b.rs"})),
            Err("field `path` and field `file_path` were both given; send only `path`".into())
        );
        // A schema that has `file_path` of its own keeps it.
        let own = json!({"type": "object", "properties": {"path": {}, "file_path": {}}});
        let n = normalize(&own, r#"{"file_path": "x"}"#).unwrap();
        assert_eq!(Value::Object(n.value), json!({"file_path": "x"}));
    }

    #[test]
    fn closed_out_fields_are_ignored_and_named_open_schemas_keep_them() {
        let n = normalize(&schema(), r#"{"path": "a", "description": "d", "zz": 1}"#).unwrap();
        assert_eq!(Value::Object(n.value), json!({"path": "a"}));
        assert_eq!(n.ignored.fields(), ["unknown field `description`", "unknown field `zz`"]);
        let open = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        let n = normalize(&open, r#"{"path": "a", "extra": 1}"#).unwrap();
        assert_eq!(Value::Object(n.value), json!({"path": "a", "extra": 1}));
        assert!(n.ignored.is_empty());
    }

    #[test]
    fn whole_numbers_in_strings_are_numbers_and_nothing_else_is() {
        assert_eq!(
            read(json!({"path": "a", "limit": "20"})),
            Ok(json!({"path": "a", "limit": 20}))
        );
        assert_eq!(
            read(json!({"path": "a", "ratio": "0.5"})),
            Ok(json!({"path": "a", "ratio": 0.5}))
        );
        for (bad, why) in [
            (
                json!({"path": "a", "limit": "twenty"}),
                "must be an integer, got the string \"twenty\"",
            ),
            (json!({"path": "a", "limit": "2.5"}), "must be an integer, got the string \"2.5\""),
            (json!({"path": "a", "limit": " 20"}), "must be an integer, got the string \" 20\""),
            (json!({"path": "a", "limit": 2.5}), "must be an integer, got the number 2.5"),
            (json!({"path": "a", "ratio": "NaN"}), "must be a number, got the string \"NaN\""),
        ] {
            let e = read(bad.clone()).unwrap_err();
            assert!(e.starts_with("field `") && e.ends_with(why), "{bad}: {e}");
        }
        // A string field keeps a string that looks like a number.
        assert_eq!(read(json!({"path": "7"})), Ok(json!({"path": "7"})));
    }

    #[test]
    fn every_error_names_the_field() {
        for (bad, why) in [
            (json!({}), "field `path` is missing"),
            (json!({"path": null}), "field `path` must be a string, got null"),
            (json!({"path": 3}), "field `path` must be a string, got the number 3"),
            (json!({"path": "a", "limit": 0}), "field `limit` must be at least 1, got 0"),
            (
                json!({"path": "a", "all": "yes"}),
                "field `all` must be a boolean (true or false), got the string \"yes\"",
            ),
            (json!({"path": "a", "edits": []}), "field `edits` must have at least 1 item, got 0"),
            (
                json!({"path": "a", "edits": [{"old": "x"}, {}]}),
                "field `old` of item 2 of field `edits` is missing",
            ),
            (json!([1]), "the arguments must be a JSON object, got an array"),
        ] {
            assert_eq!(read(bad.clone()), Err(why.into()), "{bad}");
        }
    }

    #[test]
    fn a_null_optional_field_is_left_out() {
        assert_eq!(read(json!({"path": "a", "limit": null})), Ok(json!({"path": "a"})));
    }

    #[test]
    fn nested_unknown_fields_are_named_where_they_are() {
        let n =
            normalize(&schema(), r#"{"path": "a", "edits": [{"old": "x", "why": 1}]}"#).unwrap();
        assert_eq!(n.ignored.fields(), ["unknown field `why` of item 1 of field `edits`"]);
    }

    #[test]
    fn an_error_still_names_what_was_ignored() {
        let e = normalize(&schema(), r#"{"description": "d"}"#).unwrap_err();
        assert_eq!(e.reason, "field `path` is missing");
        assert_eq!(e.ignored.fields(), ["unknown field `description`"]);
        let out = e.ignored.annotate(ToolOutput::error("x"));
        assert_eq!(out, ToolOutput::error("(ignored unknown field `description`)\nx"));
    }

    #[test]
    fn canonical_is_the_reading_or_the_input_as_sent() {
        let text = canonical(&schema(), r#"{"file_path": "conf/.env", "command": "ls"}"#);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), json!({"path": "conf/.env"}));
        assert_eq!(canonical(&schema(), r#"{"nope": 1}"#), r#"{"nope": 1}"#);
    }
}
