//! `POST /slots/{id}`: saving an idle slot's cache to a file under
//! `--slot-save-path`, restoring it, or erasing it.

use std::path::PathBuf;
use std::time::Instant;

use llama::memory::Pos;
use serde_json::{json, Value};

use super::handle::SlotAction;
use super::Engine;
use crate::server::error::ApiError;

impl Engine {
    /// Runs `action` on slot `id`; the JSON answer or the error.
    pub(super) fn slot_action(&mut self, id: usize, action: SlotAction) -> Result<Value, ApiError> {
        if id >= self.slots.len() {
            return Err(ApiError::InvalidRequest(format!(
                "invalid slot id {id}: there are {} slots",
                self.slots.len()
            )));
        }
        if self.slots[id].is_processing() {
            return Err(ApiError::Unavailable(format!(
                "slot {id} is processing a request; retry when it is idle"
            )));
        }
        let t0 = Instant::now();
        match action {
            SlotAction::Save(name) => self.save_slot(id, &name, t0),
            SlotAction::Restore(name) => self.restore_slot(id, &name, t0),
            SlotAction::Erase => {
                let n = self.slots[id].cache.len();
                self.slots[id].clear(&mut self.ctx);
                Ok(json!({"id_slot": id, "n_erased": n}))
            }
        }
    }

    /// Where slot file `name` lives.
    fn slot_file(&self, name: &str) -> Result<PathBuf, ApiError> {
        let dir = self.cfg.slot_save_path.as_ref().ok_or_else(|| {
            ApiError::NotSupported(
                "slot save and restore need the server started with --slot-save-path".into(),
            )
        })?;
        Ok(dir.join(name))
    }

    fn save_slot(&mut self, id: usize, name: &str, t0: Instant) -> Result<Value, ApiError> {
        let path = self.slot_file(name)?;
        let tokens = self.slots[id].cache.clone();
        let bytes = self
            .ctx
            .state_seq_save_file(&path, id as i32, &tokens)
            .map_err(|e| ApiError::Server(format!("failed to save slot {id}: {e}")))?;
        let n = tokens.len();
        Ok(
            json!({"id_slot": id, "filename": name, "n_saved": n, "n_written": bytes,
                  "timings": {"save_ms": t0.elapsed().as_secs_f64() * 1e3}}),
        )
    }

    fn restore_slot(&mut self, id: usize, name: &str, t0: Instant) -> Result<Value, ApiError> {
        let path = self.slot_file(name)?;
        if !path.is_file() {
            return Err(ApiError::NotFound(format!("no saved slot file '{name}'")));
        }
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        match self.ctx.state_seq_load_file(&path, id as i32) {
            Ok(tokens) => {
                let n = tokens.len();
                let s = &mut self.slots[id];
                s.pos_next = n as Pos;
                s.n_exact = n;
                s.cache = tokens;
                s.checkpoints.clear();
                Ok(
                    json!({"id_slot": id, "filename": name, "n_restored": n, "n_read": bytes,
                          "timings": {"restore_ms": t0.elapsed().as_secs_f64() * 1e3}}),
                )
            }
            Err(e) => {
                self.slots[id].clear(&mut self.ctx);
                Err(ApiError::InvalidRequest(format!(
                    "failed to restore slot {id} from '{name}': {e}"
                )))
            }
        }
    }
}
