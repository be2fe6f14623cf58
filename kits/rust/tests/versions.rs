//! The versions the kit reports are the ones Cargo.lock pins, and each terms
//! declaration parses as an object of strings.

use connaudit_kit_rust as kit;

fn locked(name: &str) -> Option<String> {
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.lock")).ok()?;
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l == format!("name = \"{name}\"") {
            return lines
                .next()
                .and_then(|v| v.strip_prefix("version = \""))
                .map(|v| v.trim_end_matches('"').to_string());
        }
    }
    None
}

#[test]
fn versions_are_the_locked_ones() {
    for (name, v) in [
        ("reqwest", kit::REQWEST_VERSION),
        ("hyper", kit::HYPER_VERSION),
        ("hyper-util", kit::HYPER_UTIL_VERSION),
        ("reqwest-retry", kit::REQWEST_RETRY_VERSION),
        ("reqwest-middleware", kit::REQWEST_MIDDLEWARE_VERSION),
    ] {
        assert_eq!(locked(name).as_deref(), Some(v), "{name}");
    }
}

#[test]
fn terms_parse() {
    for name in ["reqwest", "reqwest-retry"] {
        let t = kit::terms(name);
        let o = t.as_object().unwrap_or_else(|| panic!("{name}.terms.json is not an object"));
        assert!(o.len() > 10, "{name}: {} terms", o.len());
        assert!(
            o.values().all(|v| v.as_str().is_some_and(|s| !s.is_empty() && s.len() <= 1000)),
            "{name}"
        );
    }
}
