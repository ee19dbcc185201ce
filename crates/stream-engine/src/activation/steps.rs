//! The steps, run in order, each skipped when already recorded.

use std::sync::Arc;
use std::time::Instant;

use stream_core::payload::{ActivationStep, ActivationStepKind};
use stream_core::text::Label;
use stream_core::{EventId, NewEvent, Sha256Hex, SourceName};
use stream_declarations::install::install_files;
use stream_store::{Progress, Store, Tx};
use stream_telegram::{
    BotApi, IngressMode, MenuCommand, freeze_ingress, register_menu, resume_ingress,
};

use super::bundle::verify_bundle;
use super::error::ActivationError;
use super::plan::{
    ActivationOptions, ActivationOutcome, IngressPlan, StepOutcome, StepReport, Target, plan,
};
use super::record::{ActivationState, RecordedSteps, state_key, unanswered};
use crate::active::{ACTIVE_DECLARATION, ActiveError, active};
use crate::cooperation::{
    ConsumerRequest, ConsumerState, CooperationError, read_status, write_request,
};

/// Runs (or resumes) the activation of `target`. `on_step` is told of each
/// step as it is done or found recorded.
pub async fn activate(
    store: &Arc<dyn Store>,
    api: &BotApi,
    target: &Target,
    options: &ActivationOptions,
    on_step: &mut (dyn FnMut(&StepReport) + Send),
) -> Result<ActivationOutcome, ActivationError> {
    let consumer = target.active().consumer();
    let Some((id, recorded)) = plan(store.as_ref(), target)? else {
        return Ok(ActivationOutcome::AlreadyActive { consumer });
    };
    let telegram = SourceName::telegram(api.get_me().await?.id);
    let mut run = Run {
        store,
        api,
        target,
        options,
        id,
        telegram,
        recorded,
        parent: None,
        bundle: None,
        head: None,
    };
    run.verify_bundle(on_step).await?;
    run.freeze(on_step).await?;
    run.stop_consumer(on_step).await?;
    run.install(on_step)?;
    run.set_progress(on_step)?;
    run.await_ready(on_step).await?;
    run.register_menu(on_step).await?;
    run.resume(on_step).await?;
    let state = run.state()?;
    Ok(ActivationOutcome::Completed {
        activation_id: run.id.as_str().to_owned(),
        consumer,
        previous: state.previous_consumer,
    })
}

/// One run of one activation.
struct Run<'a> {
    store: &'a Arc<dyn Store>,
    api: &'a BotApi,
    target: &'a Target,
    options: &'a ActivationOptions,
    id: Label,
    telegram: SourceName,
    recorded: RecordedSteps,
    /// The last step's event: the next step's parent.
    parent: Option<EventId>,
    /// From verify-bundle.
    bundle: Option<Sha256Hex>,
    /// From freeze-ingress.
    head: Option<u64>,
}

impl Run<'_> {
    fn malformed(&self) -> ActivationError {
        ActivationError::RecordMalformed {
            activation: self.id.as_str().to_owned(),
        }
    }

    /// The step if recorded: taken as done, its data kept, reported.
    fn skip(
        &mut self,
        kind: ActivationStepKind,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<bool, ActivationError> {
        let Some(recorded) = self.recorded.get(&kind) else {
            return Ok(false);
        };
        let step = &recorded.step;
        let previous_ok = step.declaration_fingerprint == self.target.declaration().fingerprint
            && self
                .bundle
                .as_ref()
                .is_none_or(|b| *b == step.worker_bundle_sha256)
            && self.head.is_none_or(|h| step.frozen_head_seq == Some(h));
        if !previous_ok {
            return Err(self.malformed());
        }
        self.bundle = Some(step.worker_bundle_sha256.clone());
        self.head = step.frozen_head_seq.or(self.head);
        self.parent = Some(recorded.id.clone());
        on_step(&StepReport {
            step: kind,
            outcome: StepOutcome::Recorded,
            detail: format!("recorded earlier ({})", recorded.id.short(12)),
        });
        Ok(true)
    }

    fn bundle(&self) -> Result<Sha256Hex, ActivationError> {
        self.bundle.clone().ok_or_else(|| self.malformed())
    }

    fn head(&self) -> Result<u64, ActivationError> {
        self.head.ok_or_else(|| self.malformed())
    }

    fn event(&self, kind: ActivationStepKind) -> Result<NewEvent, ActivationError> {
        let decl = self.target.declaration();
        let payload = ActivationStep {
            activation_id: self.id.clone(),
            step: kind,
            declaration_id: Label::new(decl.id()).map_err(|_| self.malformed())?,
            declaration_version: decl.version(),
            declaration_fingerprint: decl.fingerprint.clone(),
            worker_bundle_sha256: self.bundle()?,
            frozen_head_seq: self.head,
        };
        NewEvent::build(
            &SourceName::fixed(SourceName::ACTIVATION),
            None,
            self.parent.as_ref(),
            &payload,
        )
        .map_err(|_| self.malformed())
    }

    /// Appends the step's event inside `tx`.
    fn append_in(
        &self,
        tx: &mut (impl Tx + ?Sized),
        event: &NewEvent,
        kind: ActivationStepKind,
    ) -> Result<(), ActivationError> {
        match tx.append(event)? {
            stream_store::AppendOutcome::Inserted { .. }
            | stream_store::AppendOutcome::Converged { .. } => Ok(()),
            stream_store::AppendOutcome::Conflict => Err(ActivationError::StepConflict {
                step: kind.as_str(),
            }),
        }
    }

    fn done(
        &mut self,
        kind: ActivationStepKind,
        event: &NewEvent,
        detail: String,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) {
        self.parent = Some(event.id.clone());
        tracing::info!(
            activation = %self.id.as_str().get(..12).unwrap_or_default(),
            step = kind.as_str(),
            "activation step recorded"
        );
        on_step(&StepReport {
            step: kind,
            outcome: StepOutcome::Done,
            detail,
        });
    }

    /// Appends the step alone (for steps whose effect is outside the store
    /// or in a transaction of another crate).
    fn record(
        &mut self,
        kind: ActivationStepKind,
        detail: String,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let event = self.event(kind)?;
        let mut tx = self.store.begin()?;
        self.append_in(&mut *tx, &event, kind)?;
        tx.commit()?;
        self.done(kind, &event, detail, on_step);
        Ok(())
    }

    fn state(&self) -> Result<ActivationState, ActivationError> {
        let key = state_key(self.id.as_str());
        match self.store.control(&key)? {
            None => Ok(ActivationState::default()),
            Some(value) => serde_json::from_value(value)
                .map_err(|_| CooperationError::Malformed { key }.into()),
        }
    }

    fn write_state(&self, state: &ActivationState) -> Result<(), ActivationError> {
        let key = state_key(self.id.as_str());
        let value = serde_json::to_value(state)
            .map_err(|_| ActivationError::from(CooperationError::Malformed { key: key.clone() }))?;
        let mut tx = self.store.begin()?;
        tx.set_control(&key, &value)?;
        tx.commit()?;
        Ok(())
    }

    async fn verify_bundle(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::VerifyBundle;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let bundle = verify_bundle(
            &self.options.worker,
            self.options.allow_unenforced_sandbox,
            self.options.provider_timeout,
        )
        .await?;
        let detail = format!("worker bundle {}, sandbox enforced", bundle.short(12));
        self.bundle = Some(bundle);
        self.record(kind, detail, on_step)
    }

    /// The ingress mode, with the webhook URL kept in the activation's state
    /// (read from Telegram the first time, before anything is deleted).
    async fn ingress_mode(&self, may_ask: bool) -> Result<IngressMode, ActivationError> {
        match &self.options.ingress {
            IngressPlan::Polling => Ok(IngressMode::Polling),
            IngressPlan::Webhook { secret } => {
                let mut state = self.state()?;
                let url = match state.webhook_url.clone() {
                    Some(url) => url,
                    None if may_ask => {
                        let url = self.api.get_webhook_info().await?.url;
                        if url.is_empty() {
                            return Err(ActivationError::WebhookNotRegistered);
                        }
                        state.webhook_url = Some(url.clone());
                        self.write_state(&state)?;
                        url
                    }
                    None => return Err(self.malformed()),
                };
                Ok(IngressMode::Webhook {
                    url,
                    secret: secret.clone(),
                })
            }
        }
    }

    async fn freeze(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::FreezeIngress;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let mut state = self.state()?;
        if state.previous_consumer.is_none() {
            state.previous_consumer = active(self.store.as_ref())?
                .filter(|a| *a != self.target.active())
                .map(|a| a.consumer());
            self.write_state(&state)?;
        }
        let mode = self.ingress_mode(true).await?;
        freeze_ingress(self.store, self.api, &mode).await?;
        // Every storing transaction re-reads the ingress row: from the
        // freeze's commit on, this head cannot move.
        let head = self.store.source_head(&self.telegram)?;
        self.head = Some(head);
        let how = match mode {
            IngressMode::Polling => "polling",
            IngressMode::Webhook { .. } => "webhook deleted, pending updates kept",
        };
        self.record(kind, format!("{how}; Telegram head at seq {head}"), on_step)
    }

    async fn stop_consumer(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::StopConsumer;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let head = self.head()?;
        let Some(old) = self.state()?.previous_consumer else {
            return self.record(kind, "no consumer was active".to_owned(), on_step);
        };
        {
            let mut tx = self.store.begin()?;
            write_request(
                &mut *tx,
                &old,
                &ConsumerRequest::Stopped {
                    activation_id: self.id.as_str().to_owned(),
                    through_seq: head,
                },
            )?;
            tx.commit()?;
        }
        let started = Instant::now();
        let detail = loop {
            let status = read_status(self.store.as_ref(), &old)?;
            let serving = match &status {
                Some(s)
                    if s.state == ConsumerState::Stopped
                        && s.activation_id.as_deref() == Some(self.id.as_str()) =>
                {
                    let left = unanswered(self.store.as_ref(), &old, &self.telegram, head)?;
                    if left > 0 {
                        return Err(ActivationError::StoppedWithUnanswered {
                            consumer: old,
                            unanswered: left,
                        });
                    }
                    break format!("{old} stopped by serve pid {}", s.process.pid);
                }
                // A lease that cannot be told counts as held: wait.
                Some(_) => self.options.serve_lease.held() != Some(false),
                None => false,
            };
            if !serving {
                let left = unanswered(self.store.as_ref(), &old, &self.telegram, head)?;
                if left > 0 {
                    return Err(ActivationError::UnansweredWithoutServe {
                        consumer: old,
                        unanswered: left,
                    });
                }
                break format!("{old} was not running; nothing left unanswered");
            }
            if started.elapsed() >= self.options.stop_timeout {
                return Err(ActivationError::StopTimedOut {
                    consumer: old,
                    waited_secs: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(self.options.poll_every).await;
        };
        self.record(kind, detail, on_step)
    }

    fn install(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::InstallDeclaration;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let decl = self.target.declaration();
        decl.install(self.store.as_ref())?;
        let event = self.event(kind)?;
        let mut tx = self.store.begin()?;
        decl.verify(&*tx)?;
        let installed = install_files(&mut *tx, decl, &self.target.yaml, &self.telegram)
            .map_err(CooperationError::from)?;
        self.append_in(&mut *tx, &event, kind)?;
        tx.commit()?;
        let detail = format!(
            "{}@{} fingerprint {}, declaration {}, prompt {}",
            decl.id(),
            decl.version(),
            decl.fingerprint.short(12),
            installed.declaration_sha256.short(12),
            installed
                .prompt_sha256
                .as_ref()
                .map_or("none", |p| p.short(12)),
        );
        self.done(kind, &event, detail, on_step);
        Ok(())
    }

    fn set_progress(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::SetProgress;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let head = self.head()?;
        let target = self.target.active();
        let consumer = target.consumer();
        let value = serde_json::to_value(&target).map_err(|_| ActiveError::Malformed)?;
        let event = self.event(kind)?;
        let mut tx = self.store.begin()?;
        self.target.declaration().verify(&*tx)?;
        tx.set_progress(
            &consumer,
            &Progress {
                source: self.telegram.clone(),
                seq: head,
            },
        )?;
        tx.set_control(ACTIVE_DECLARATION, &value)?;
        write_request(&mut *tx, &consumer, &ConsumerRequest::Running {})?;
        self.append_in(&mut *tx, &event, kind)?;
        tx.commit()?;
        self.done(
            kind,
            &event,
            format!("{consumer} at seq {head} (replay: now); active declaration switched"),
            on_step,
        );
        Ok(())
    }

    async fn await_ready(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::AwaitReady;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let bundle = self.bundle()?;
        let consumer = self.target.active().consumer();
        let started = Instant::now();
        let pid = loop {
            // Ready only when a serve is known to hold the store.
            let serving = self.options.serve_lease.held() == Some(true);
            let status = read_status(self.store.as_ref(), &consumer)?;
            if let Some(s) = &status {
                let current = s.state == ConsumerState::Running
                    && s.declaration_fingerprint == self.target.declaration().fingerprint;
                if current && serving {
                    if s.telegram_source != self.telegram {
                        return Err(ActivationError::ReadyMismatch {
                            consumer,
                            what: "telegram source",
                        });
                    }
                    if s.worker_bundle_sha256 != bundle {
                        return Err(ActivationError::ReadyMismatch {
                            consumer,
                            what: "worker bundle",
                        });
                    }
                    break s.process.pid;
                }
            }
            // A serve that holds the store may still report: rebuilding for
            // the new consumer, or following from the old one.
            if !serving && started.elapsed() >= self.options.no_serve_grace {
                return Err(ActivationError::NoServe { consumer });
            }
            if started.elapsed() >= self.options.ready_timeout {
                return Err(ActivationError::ReadyTimedOut {
                    consumer,
                    waited_secs: started.elapsed().as_secs(),
                });
            }
            tokio::time::sleep(self.options.poll_every).await;
        };
        self.record(
            kind,
            format!(
                "{consumer} ready in serve pid {pid}: {}, worker bundle {}",
                self.telegram,
                bundle.short(12)
            ),
            on_step,
        )
    }

    async fn register_menu(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::RegisterMenu;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let commands = self
            .target
            .active()
            .commands
            .iter()
            .enumerate()
            .map(|(i, c)| MenuCommand::new(i, c.command.clone(), c.description.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let report = register_menu(self.api, &commands, self.options.notice_chat).await?;
        let notice = match report.notice_message_id {
            Some(id) => format!("help notice sent (message {id})"),
            None => "no help notice".to_owned(),
        };
        self.record(
            kind,
            format!("{} commands; {notice}", report.commands),
            on_step,
        )
    }

    async fn resume(
        &mut self,
        on_step: &mut (dyn FnMut(&StepReport) + Send),
    ) -> Result<(), ActivationError> {
        let kind = ActivationStepKind::ResumeIngress;
        if self.skip(kind, on_step)? {
            return Ok(());
        }
        let mode = self.ingress_mode(false).await?;
        resume_ingress(self.store, self.api, &mode).await?;
        let how = match mode {
            IngressMode::Polling => "polling",
            IngressMode::Webhook { .. } => "webhook set again to the same URL",
        };
        self.record(kind, how.to_owned(), on_step)
    }
}
