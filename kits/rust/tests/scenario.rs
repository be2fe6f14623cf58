//! A malformed scenario is an error saying what is wrong, never a panic.

use connaudit_kit_rust::kit::{summary, Scenario};
use serde_json::json;

#[test]
fn malformed_scenarios_are_errors() {
    let good = json!({"name": "ok", "steps": "request", "url": "http://127.0.0.1:1/a", "ok_url": "http://127.0.0.1:1/ok",
        "request": {"method": "GET"}, "policy": {}, "expect": {}});
    assert!(serde_json::from_value::<Scenario>(good.clone()).is_ok());
    for key in ["name", "steps", "url", "ok_url", "request", "policy"] {
        let mut bad = good.clone();
        bad.as_object_mut().map(|o| o.remove(key));
        let err = serde_json::from_value::<Scenario>(bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains(key), "without {key}: {err:?}");
    }
    let mut bad = good.clone();
    bad["policy"]["max_retries"] = json!("two");
    assert!(serde_json::from_value::<Scenario>(bad).is_err());
}

#[test]
fn a_done_answer_without_counts_is_an_error() {
    assert!(summary("reqwest", &json!({"ok": true})).is_err());
    let (line, ok) = summary("reqwest", &json!({"ok": false, "passed": 3, "failed": 1, "not_configurable": 2})).expect("summary");
    assert_eq!(
        (line.as_str(), ok),
        ("connaudit kit: reqwest: 3 passed, 1 failed, 2 not configurable", false)
    );
}
