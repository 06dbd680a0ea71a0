//! The window's settings, kept in `settings.json` in the data folder and
//! written atomically (temporary file, fsync, rename).

use std::io::Write;
use std::path::PathBuf;

use reverie_core::{Home, SamplingParams};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    pub sampling: SamplingParams,
    pub tools: bool,
    pub max_tool_calls: usize,
    /// Local time ("HH:MM") at which the night starts by itself.
    pub sleep_at: Option<String>,
    /// Start the night after this many minutes without a message.
    pub idle_minutes: Option<u64>,
    /// "light", "dark" or "system".
    pub theme: String,
    /// Practice batches each night starts with (none: the night trains on
    /// the day only).
    pub practice: Vec<reverie_night::PracticeBatch>,
    /// Python, jobs and git run confined to the workspace. Turning it off
    /// gives them all the user's rights.
    pub sandbox: bool,
    /// The OpenAI-compatible API on 127.0.0.1 at this port (off: none).
    pub api_port: Option<u16>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            sampling: SamplingParams::default(),
            tools: true,
            max_tool_calls: reverie_agent::DEFAULT_MAX_TOOL_CALLS,
            sleep_at: None,
            idle_minutes: None,
            theme: "system".into(),
            practice: Vec::new(),
            sandbox: true,
            api_port: None,
        }
    }
}

fn path(home: &Home) -> PathBuf {
    home.root().join("settings.json")
}

impl Settings {
    /// The saved settings; defaults when there are none. A damaged file is
    /// kept aside (`settings.json.damaged`) rather than silently replaced.
    pub fn load(home: &Home) -> Settings {
        let p = path(home);
        let Ok(bytes) = std::fs::read(&p) else {
            return Settings::default();
        };
        match serde_json::from_slice(&bytes) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(path = %p.display(), "settings unreadable ({e}); using defaults");
                let _ = std::fs::rename(&p, p.with_extension("json.damaged"));
                Settings::default()
            }
        }
    }

    /// Checks the values a person can type.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(at) = &self.sleep_at {
            reverie_night::trigger::parse_clock(at)
                .map_err(|e| format!("sleep time {at:?}: {e}"))?;
        }
        if self.api_port.is_some_and(|p| p < 1024) {
            return Err("the API port must be 1024 or above".into());
        }
        if self.idle_minutes == Some(0) {
            return Err("idle minutes must be at least 1 (or off)".into());
        }
        let s = &self.sampling;
        if !(0.0..=5.0).contains(&s.temperature) {
            return Err(format!("temperature must be 0–5 (got {})", s.temperature));
        }
        if !(0.0..=1.0).contains(&s.top_p) || s.top_p == 0.0 {
            return Err(format!("top-p must be in (0, 1] (got {})", s.top_p));
        }
        if s.max_tokens == 0 {
            return Err("max tokens must be at least 1".into());
        }
        reverie_night::check_batches(&self.practice).map_err(|e| e.to_string())?;
        if !["light", "dark", "system"].contains(&self.theme.as_str()) {
            return Err(format!(
                "theme must be light, dark or system (got {:?})",
                self.theme
            ));
        }
        Ok(())
    }

    pub fn save(&self, home: &Home) -> std::io::Result<()> {
        std::fs::create_dir_all(home.root())?;
        let p = path(home);
        let tmp = p.with_extension("json.tmp");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_a_damaged_file_is_kept_aside() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        assert_eq!(Settings::load(&home), Settings::default());
        let s = Settings {
            sleep_at: Some("23:30".into()),
            idle_minutes: Some(45),
            ..Settings::default()
        };
        s.validate().unwrap();
        s.save(&home).unwrap();
        assert_eq!(Settings::load(&home), s);
        std::fs::write(dir.path().join("settings.json"), b"{not json").unwrap();
        assert_eq!(Settings::load(&home), Settings::default());
        assert!(dir.path().join("settings.json.damaged").exists());
    }

    #[test]
    fn bad_values_are_refused_with_what_to_type() {
        let bad = |f: fn(&mut Settings)| {
            let mut s = Settings::default();
            f(&mut s);
            s.validate().unwrap_err()
        };
        assert!(bad(|s| s.sleep_at = Some("25:00".into())).contains("sleep time"));
        assert!(bad(|s| s.idle_minutes = Some(0)).contains("at least 1"));
        assert!(bad(|s| s.sampling.top_p = 0.0).contains("top-p"));
        assert!(bad(|s| s.theme = "neon".into()).contains("theme"));
        fn practice(family: &str, tasks: usize) -> Vec<reverie_night::PracticeBatch> {
            vec![reverie_night::PracticeBatch {
                family: family.into(),
                tasks,
            }]
        }
        assert!(bad(|s| s.practice = practice("units", 4)).contains("held-out"));
        assert!(bad(|s| s.practice = practice("ledger", 0)).contains("at least one task"));
        let ok = Settings {
            practice: practice("arithmetic", 6),
            ..Settings::default()
        };
        assert_eq!(ok.validate(), Ok(()));
    }
}
