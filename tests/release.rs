//! The release workflow and script keep the signing keys and the write
//! token where they are needed and nowhere else (issue 58, item 12):
//! read from .github/workflows/release.yml and by running
//! scripts/release.sh, since the workflow itself runs only on GitHub.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

const WORKFLOW: &str = include_str!("../.github/workflows/release.yml");

/// The workflow's jobs: (name, the job's lines).
fn jobs() -> Vec<(String, Vec<&'static str>)> {
    let mut jobs: Vec<(String, Vec<&str>)> = Vec::new();
    let mut inside = false;
    for line in WORKFLOW.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            inside = line == "jobs:";
            continue;
        }
        if !inside {
            continue;
        }
        match line.strip_prefix("  ").filter(|l| !l.starts_with(' ') && !l.starts_with('#')) {
            Some(name) => jobs.push((name.trim_end_matches(':').to_string(), Vec::new())),
            None => {
                if let Some((_, lines)) = jobs.last_mut() {
                    lines.push(line);
                }
            }
        }
    }
    jobs
}

/// A job's steps, each as its lines.
fn steps<'a>(lines: &[&'a str]) -> Vec<Vec<&'a str>> {
    let mut steps: Vec<Vec<&str>> = Vec::new();
    for l in lines {
        if l.trim_start().starts_with("- ") && l.len() - l.trim_start().len() == 6 {
            steps.push(Vec::new());
        }
        if let Some(s) = steps.last_mut() {
            s.push(l);
        }
    }
    steps
}

#[test]
fn every_action_is_pinned_by_commit() {
    let uses: Vec<&str> =
        WORKFLOW.lines().filter_map(|l| l.trim_start().trim_start_matches("- ").strip_prefix("uses: ")).collect();
    assert!(uses.len() >= 5, "{uses:?}");
    for u in uses {
        let (_, rev) = u.split_once('@').expect("owner/name@revision");
        let sha = rev.split_whitespace().next().unwrap_or_default();
        assert!(sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()), "not pinned by commit: {u}");
    }
}

#[test]
fn the_keys_are_in_the_signing_step_alone_and_the_write_token_in_a_job_that_runs_no_code_of_ours() {
    let jobs = jobs();
    let names: Vec<&str> = jobs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["build", "publish", "pages"]);
    let mut signing = 0;
    for (name, lines) in &jobs {
        for step in steps(lines) {
            let text = step.join("\n");
            if text.contains("secrets.") {
                signing += 1;
                assert_eq!(name, "build");
                assert!(
                    text.contains("scripts/release.sh --key-env"),
                    "keys given to a step that does not sign:\n{text}"
                );
                assert!(!text.contains("RUNNER_TEMP") && !text.contains("> "), "keys written to a file:\n{text}");
            }
        }
        let writes = lines.iter().any(|l| l.trim() == "contents: write");
        assert_eq!(writes, name == "publish", "{name}: contents: write");
        if writes {
            assert!(
                !lines.iter().any(|l| l.contains("run:") || l.contains("checkout")),
                "{name} runs code:\n{lines:?}"
            );
        }
    }
    assert_eq!(signing, 1, "one step holds the keys");
    assert!(WORKFLOW.contains("permissions:\n  contents: read"), "the workflow's default is read-only");
}

/// `scripts/release.sh` (as committed: a clone of HEAD is changed) on a
/// checkout with uncommitted changes: refused before anything is built,
/// unless told.
#[test]
fn a_release_from_uncommitted_changes_is_refused() {
    let dir = common::TempDir::new();
    let clone = dir.0.join("clone");
    let root = env!("CARGO_MANIFEST_DIR");
    let ok = Command::new("git").args(["clone", "-q", "--depth", "1", &format!("file://{root}")]).arg(&clone).status();
    if !ok.is_ok_and(|s| s.success()) {
        eprintln!("skipped: cannot clone {root}");
        return;
    }
    std::fs::write(clone.join("README.md"), "changed\n").unwrap();
    let out =
        Command::new("bash").arg(clone.join("scripts/release.sh")).args(["--arch", "x86_64", "out"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("uncommitted changes") && err.contains("--allow-dirty"), "{err}");
    assert!(!clone.join("out").exists() && !clone.join("dist").exists(), "nothing built");
    // The keys from the environment need all four.
    let out = Command::new("bash")
        .arg(clone.join("scripts/release.sh"))
        .args(["--key-env", "--allow-dirty", "out"])
        .env("OPKG_SIGNING_KEY", "x")
        .env_remove("APK_SIGNING_KEY")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--key-env: OPKG_PUBLIC_KEY is not set"), "{err}");
}
