/**
 * <deuz-chat>: the chat of deuz-django as a custom element — no framework, no build step.
 *
 *   <deuz-chat agent="assistant" socket="/ws/deuz/" runs-url="/api/deuz/runs/"
 *              approvals-url="/deuz/runs/RUN_ID/approvals/" login-url="/login/"></deuz-chat>
 *
 * One WebSocket, one durable run per conversation. The server journals every part of a
 * run under a gapless `seq` before sending it (deuz_django/streaming/consumers.py
 * documents the frames). The element keeps the last seq it saw of the run it shows; when
 * the socket drops it reconnects with backoff and subscribes again from that seq, so the
 * server replays exactly the gap. A page load (or reload) renders the run from the start
 * (lastSeq -1). A `step-start` for a step already shown means a crashed server had begun
 * that step and the next one re-ran it (SPEC R11.13): the partial output of the step is
 * dropped and the re-run is rendered in its place.
 *
 * While a run answers or waits for a person, what the user types goes to that run as an
 * `input` frame (steering, docs/steering.md): shown as queued until the run's stream
 * says a step boundary delivered it (`data-input-delivered`), then as a message of the
 * conversation, where the model read it. Stop and "Stop and say why" send `stop`.
 *
 * The element renders into itself (no shadow root: the page's fonts apply, and labels
 * and ARIA references work as in any form). Children with slot="welcome" replace the
 * text a new conversation shows; any element with a data-prompt attribute in it is an
 * example prompt: clicking it asks that question. docs/chat-component.md has the rest.
 */

const STATUS_LABELS = {
  running: "Running", suspended: "Waiting for approval", completed: "Done", stopped: "Stopped",
};
const VERDICT_LABELS = { approved: "Approved", denied: "Denied", expired: "Expired" };
const EXPIRED_REASON = "Approval expired."; // deuz_django.approvals.verdicts.EXPIRED_REASON
const EXPIRED_TEXT = "Expired — it was not decided in time, so the call does not run.";
const TIMED_OUT = "Timed out"; // deuz_django.deadlines.TIMED_OUT starts a timed-out call's reason
const DEADLINE_RECHECK_MS = 1500; // after a deadline passes, ask what it did (escalated?)
const APPROVAL_RETRIES = 20; // an approval row is stored with the leg's last checkpoint
const STOP_RETRIES = 10; // a stop takes effect as its leg ends, just after the leg's last part
const IN_DOUBT = "outcome_unknown"; // deuz_django.models.ApprovalKind.OUTCOME_UNKNOWN
const IN_DOUBT_TEXT = "This call started before a crash and left no outcome. Did it happen?";
// A call a crash left in doubt is answered in one of three ways (deuz_django/approvals/verdicts.py).
const ANSWERS = {
  happened: { button: "It happened — record this result", sending: "Recording the result…",
    title: "It happened", outcome: "Recorded — the assistant continues with this result." },
  again: { button: "Run it again", sending: "Asking to run it again…",
    title: "Run again", outcome: "The call runs again — the assistant continues." },
  failed: { button: "Mark it failed", sending: "Marking it failed…",
    title: "Marked failed", outcome: "Marked failed." },
};

/** Build an element: h("p", {class: "x"}, "text", child). */
function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") element.className = value;
    else if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else element.setAttribute(name, value === true ? "" : value);
  }
  element.append(...children);
  return element;
}

function newRunId() {
  // crypto.randomUUID needs a secure context; getRandomValues works on plain http too.
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** "Stopped by staff: Customer called." — a stop from the runs API ({by, reason}). */
function describeStop(stop) {
  if (!stop) return "Stopped";
  return stop.reason ? `Stopped by ${stop.by}: ${stop.reason}` : `Stopped by ${stop.by}.`;
}

function describeOutput(output) {
  return typeof output === "string" ? output : JSON.stringify(output);
}

/** "3 hours 20 minutes", "5 minutes", "42 seconds": the two largest units. */
function timeLeft(seconds) {
  const units = [["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
  const parts = [];
  let rest = Math.max(1, Math.ceil(seconds));
  for (const [name, size] of units) {
    const count = Math.floor(rest / size);
    rest -= count * size;
    if (count) parts.push(`${count} ${name}${count === 1 ? "" : "s"}`);
  }
  return parts.slice(0, 2).join(" ");
}

// -- one tool call ---------------------------------------------------------------------------

class ToolCall {
  constructor(name) {
    this.name = name;
    this.state = null;
    this.paused = false; // the leg ended while this ran: a sub-agent waits for approval
    this.error = "";
    this.label = h("span", { class: "tool-label" });
    this.el = h("li", { class: "tool" }, this.label);
    this.card = null;
  }

  update(part) {
    this.paused = false;
    if (part.type === "tool-result") {
      this.output = part.output;
      this.error = part.isError ? describeOutput(part.output) : "";
    } else {
      this.state = part.state;
      this.denied = Boolean(part.denied);
      this.deniedReason = part.deniedReason || "";
    }
    this.render();
    this.card?.follow(this);
  }

  pause() {
    this.paused = this.state === "executing";
    this.render();
  }

  render() {
    this.el.dataset.state = this.denied ? "denied" : this.paused ? "awaiting-approval" : this.state || "";
    this.label.textContent = this.describe();
  }

  describe() {
    const name = this.name;
    switch (this.state) {
      case "awaiting-approval":
        return this.card?.question ? `${name} waits for your answer` : `${name} waits for approval`;
      case "executing":
        return this.paused ? `${name} paused until a call is decided` : `running ${name}…`;
      case "complete":
        return `${name} done`;
      case "error":
        if (this.denied) return `${name} denied${this.deniedReason ? `: ${this.deniedReason}` : ""}`;
        return `${name} failed${this.error ? `: ${this.error}` : ""}`;
      default:
        return `calling ${name}…`;
    }
  }
}

// -- an approval card ------------------------------------------------------------------------

class ApprovalCard {
  constructor(conversation, part, agentPath) {
    this.conversation = conversation;
    this.part = part;
    this.state = "checking"; // → offered | staff | sent | recorded | settled
    this.kind = "approval"; // or IN_DOUBT, once the server said so
    this.answer = null; // the answer sent, for a call in doubt: a key of ANSWERS
    this.known = false; // the server said who may decide it (and whether it was decided)
    this.automatic = null; // {decider, reason}: a standing rule or grant decided it
    this.allowed = false; // approved with "and allow for this chat"
    this.question = part.question || null; // {text, choices?, schema?}: a question tool asks
    const headingId = `approval-${conversation.runId}-${part.approvalId}`;
    this.decision = h("div", { class: "decision", "aria-live": "polite" },
      h("p", { class: "muted" }, "Checking who may decide…"));
    this.heading = h("h3", { id: headingId });
    this.title(this.question ? "A question for you" : "Approval needed");
    // The call's deadline, counted down (role=timer: not read out at every tick).
    this.clock = h("p", { class: "deadline", role: "timer", hidden: true });
    this.ticking = null;
    this.el = h("section", { class: this.question ? "approval question" : "approval",
      "aria-labelledby": headingId, tabindex: "-1" },
      this.heading,
      agentPath.length ? h("p", { class: "asked-by" }, `asked by ${agentPath.join(" › ")}`) : "",
      this.question
        ? h("p", { class: "question-text" }, this.question.text)
        : h("pre", { class: "tool-input" }, h("code", {}, JSON.stringify(part.input, null, 2))),
      this.clock,
      this.decision);
  }

  get open() {
    return this.state !== "settled" && this.state !== "recorded";
  }

  show(...children) {
    this.decision.replaceChildren(...children);
  }

  /** The card's heading: what it asks for, then how it was decided. */
  title(label) {
    this.heading.textContent = this.question ? label : `${label}: ${this.part.toolName}`;
  }

  /** What the server says about this approval: still pending, and may this user decide? */
  offer(info) {
    this.known = true;
    this.automatic = info.automatic || null;
    // The run may have moved on before the server answered (a standing rule decided at once).
    if (this.state === "settled" && this.automatic) {
      this.showAutomatic(this.el.dataset.settled === "denied" ? "denied" : "approved");
    }
    if (this.state !== "checking") return;
    if (info.kind === IN_DOUBT) {
      this.kind = IN_DOUBT;
      this.heading.after(h("p", { class: "in-doubt" }, IN_DOUBT_TEXT));
      this.title("Outcome unknown");
    }
    this.showDeadline(info);
    if (info.status !== "pending") {
      this.record(info.status);
    } else if (info.mayDecide) {
      this.editable = Boolean(info.editable);
      this.state = "offered";
      this.showButtons();
    } else {
      this.state = "staff";
      if (this.question) {
        this.show(h("p", { class: "waiting" }, "Waiting for a staff member's answer"));
        return;
      }
      this.show(h("p", { class: "waiting" }, "Waiting for staff approval"),
        h("p", { class: "muted" }, "A finance staff member decides this in the admin; " +
          "the conversation continues here once they have."));
    }
  }

  /**
   * A pending call with a deadline: what happens then and the time left, counted down
   * from the server's secondsLeft; once it passes, ask the server what it did.
   */
  showDeadline(info) {
    clearInterval(this.ticking);
    this.ticking = null;
    if (info.status !== "pending" || info.deadline === null || info.deadline === undefined) {
      this.clock.hidden = true;
      return;
    }
    const due = Date.now() + info.secondsLeft * 1000;
    const escalated = info.escalatedTo ? `Escalated to ${info.escalatedTo}. ` : "";
    const action = info.escalateTo ? `Goes to ${info.escalateTo} too` : "Times out";
    const tick = () => {
      const left = (due - Date.now()) / 1000;
      if (left > 0) {
        setText(this.clock, `${escalated}${action} in ${timeLeft(left)}.`);
        return;
      }
      setText(this.clock, `${escalated}${info.escalateTo ? "Escalating" : "Timing out"}…`);
      clearInterval(this.ticking);
      this.ticking = setTimeout(() => this.conversation.recheckDeadline(this), DEADLINE_RECHECK_MS);
    };
    this.clock.hidden = false;
    tick();
    if (!this.ticking) this.ticking = setInterval(tick, 1000);
  }

  stopClock() {
    clearInterval(this.ticking);
    this.ticking = null;
    this.clock.hidden = true;
  }

  showButtons(problem = "") {
    if (this.kind === IN_DOUBT) return this.showAnswers(problem);
    if (this.question) return this.showQuestionForm(problem);
    const reasonId = `${this.el.getAttribute("aria-labelledby")}-reason`;
    const reason = h("textarea", { id: reasonId, rows: "2" });
    const decide = (approved, allow) => {
      const verdict = { approved, reason: reason.value.trim() };
      if (allow) verdict.allow = { scope: "run" }; // a grant for the rest of this chat's run
      if (this.send(verdict, approved ? "Approving…" : "Denying…")) this.allowed = Boolean(allow);
    };
    this.show(
      problem ? h("p", { class: "form-error", role: "alert" }, problem) : "",
      h("label", { for: reasonId }, "Reason (optional)"),
      reason,
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", onclick: () => decide(true) }, "Approve"),
        h("button", { type: "button", onclick: () => decide(true, true) }, "Approve and allow for this chat"),
        this.editable ? h("button", { type: "button", onclick: () => this.showEditor() }, "Edit, then approve") : "",
        h("button", { type: "button", onclick: () => decide(false) }, "Deny")),
      h("p", { class: "muted" }, `"Approve and allow" also approves later ${this.part.toolName} ` +
        "calls in this conversation, without asking."));
  }

  /** An editable tool's call: change its input (JSON), then approve it with the change. */
  showEditor(problem = "") {
    const id = this.el.getAttribute("aria-labelledby");
    const editor = h("textarea", { id: `${id}-edit`, class: "result-input", rows: "6",
      "aria-describedby": `${id}-edit-help` });
    editor.value = JSON.stringify(this.part.input, null, 2);
    const error = h("p", { class: "form-error", role: "alert" }, problem);
    const approve = () => {
      let editedInput;
      try {
        editedInput = JSON.parse(editor.value);
      } catch {
        editedInput = null;
      }
      if (!editedInput || typeof editedInput !== "object" || Array.isArray(editedInput)) {
        error.textContent = "Input: enter the call's input as a JSON object.";
        editor.setAttribute("aria-invalid", "true");
        editor.focus();
        return;
      }
      if (this.send({ approved: true, reason: "", editedInput }, "Approving with your changes…")) {
        this.sentEdit = true;
      }
    };
    this.show(
      error,
      h("label", { for: editor.id }, "Input (JSON)"),
      editor,
      h("p", { id: `${id}-edit-help`, class: "muted" },
        "The call runs with this input instead of the one the assistant asked for."),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", onclick: approve }, "Approve with these changes"),
        h("button", { type: "button", onclick: () => this.showButtons() }, "Cancel")));
    editor.focus();
  }

  /** A call in doubt: it happened (with the result the user saw), run it again, or failed. */
  showAnswers(problem = "") {
    const id = this.el.getAttribute("aria-labelledby");
    const result = h("textarea", { id: `${id}-result`, class: "result-input", rows: "3",
      "aria-describedby": `${id}-result-help`, placeholder: '"sent", or {"id": 42}' });
    const reason = h("textarea", { id: `${id}-reason`, rows: "2" });
    const error = h("p", { class: "form-error", role: "alert" }, problem);
    const answer = (key) => {
      const verdict = { approved: key !== "failed", reason: reason.value.trim() };
      if (key === "happened") {
        try {
          verdict.result = JSON.parse(result.value);
        } catch {
          error.textContent = "Result: enter the call's result as JSON (text in double quotes).";
          result.setAttribute("aria-invalid", "true");
          result.focus();
          return;
        }
      }
      if (this.send(verdict, ANSWERS[key].sending)) this.answer = key;
    };
    this.show(
      error,
      h("label", { for: result.id }, "Result (JSON)"),
      result,
      h("p", { id: `${id}-result-help`, class: "muted" },
        "What the call returned, as you saw it happen — needed for \"It happened\"."),
      h("label", { for: reason.id }, "Reason (optional)"),
      reason,
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", onclick: () => answer("happened") },
          ANSWERS.happened.button),
        h("button", { type: "button", onclick: () => answer("again") }, ANSWERS.again.button),
        h("button", { type: "button", onclick: () => answer("failed") }, ANSWERS.failed.button)));
  }

  /**
   * A question: a button for each of its choices, fields generated from a simple JSON
   * schema (a JSON box for any other schema), or a text box. The answer goes with the
   * verdict and its token; the server checks it, and a bad one comes back as an error.
   */
  showQuestionForm(problem = "") {
    const id = this.el.getAttribute("aria-labelledby");
    const error = h("p", { class: "form-error", role: "alert" }, problem);
    const reply = (answer) => {
      if (this.send({ approved: true, answer }, "Sending your answer…")) this.answered = answer;
    };
    const decline = h("button", { type: "button", onclick: () =>
      this.send({ approved: false, reason: "The person declined to answer." }, "Declining…") },
    "Decline to answer");
    const { choices, schema } = this.question;
    if (choices) {
      this.show(error, h("div", { class: "actions choices" },
        ...choices.map((choice) => h("button", { type: "button", class: "primary",
          onclick: () => reply(choice) }, choice)),
        decline));
      return;
    }
    const fields = schema ? schemaFields(schema, id) : textField(id);
    const form = h("form", { class: "answer-form", novalidate: "" }, ...fields.elements,
      h("div", { class: "actions" },
        h("button", { type: "submit", class: "primary" }, "Send answer"), decline));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      try {
        reply(fields.read());
      } catch (problem) {
        error.textContent = problem.message;
      }
    });
    this.show(error, form);
    form.querySelector("input, textarea, select")?.focus();
  }

  /** Send a verdict; the card says so until the server answers. */
  send(verdict, sending) {
    if (!this.conversation.decide(this, verdict)) return false;
    this.state = "sent";
    this.show(h("p", { class: "muted", tabindex: "-1" }, sending));
    this.decision.firstChild.focus();
    return true;
  }

  /** The server recorded a verdict (ours, or one made elsewhere before this page loaded). */
  record(status) {
    if (!this.open) return;
    this.stopClock();
    this.state = "recorded";
    const answer = ANSWERS[this.answer];
    if (answer && status !== "expired") {
      this.title(answer.title);
      this.show(h("p", { class: "outcome", tabindex: "-1" }, answer.outcome));
      return;
    }
    if (this.automatic && status !== "expired") return this.showAutomatic(status);
    if (this.question && status === "approved") return this.showAnswered(this.answered);
    const text = {
      approved: this.allowed
        ? `Approved — later ${this.part.toolName} calls in this conversation are approved automatically.`
        : this.sentEdit ? "Approved with your changes — the assistant continues."
          : "Approved — the assistant continues.",
      denied: "Denied.",
      expired: EXPIRED_TEXT,
    };
    this.title(VERDICT_LABELS[status] || "Decided");
    this.show(h("p", { class: "outcome", tabindex: "-1" }, text[status] || `This approval ${status}.`));
  }

  /** Decided by a standing rule or a grant: say so, with its reason, and name it. */
  showAutomatic(status) {
    const verdict = status === "denied" ? "Denied" : "Approved";
    this.title(`${verdict} automatically`);
    const { by, decider, reason } = this.automatic;
    this.show(
      h("p", { class: "outcome", tabindex: "-1" }, `${verdict} automatically: ${reason}`),
      by === "grant" ? "" : h("p", { class: "muted automatic-by" }, `By ${decider}`));
  }

  refused(message) {
    this.state = "offered";
    this.answer = null;
    this.showButtons(message);
  }

  /** The call moved on in the run: the verdict is settled, whoever gave it. */
  follow(tool) {
    if (tool.state === "awaiting-approval" || tool.state?.startsWith("input")) return;
    if (this.question && tool.state === "executing") return; // its result is the answer
    // A call in doubt that runs again settles once more when its result arrives; so does an
    // approved call whose result says a person edited its input before approving.
    const editArrived = tool.output?.editedInput !== undefined && !this.edited;
    if (this.state === "settled" && this.kind !== IN_DOUBT && !editArrived) return;
    const focused = this.el.contains(document.activeElement);
    this.stopClock();
    this.state = "settled";
    this.el.dataset.settled = tool.denied ? "denied" : "approved";
    if (this.kind === IN_DOUBT) this.settleInDoubt(tool);
    else this.settleApproval(tool);
    if (focused) this.decision.firstChild.focus();
  }

  /** A question was answered (here or elsewhere): show the answer the run goes on with. */
  showAnswered(answer) {
    this.title("Answered");
    const said = answer === undefined ? "" : typeof answer === "string" ? answer : JSON.stringify(answer);
    this.show(h("p", { class: "outcome", tabindex: "-1" },
      said ? `Answered: ${said} — the assistant continues.` : "Answered — the assistant continues."));
  }

  settleApproval(tool) {
    if (this.automatic) return this.showAutomatic(tool.denied ? "denied" : "approved");
    if (this.question && !tool.denied) return this.showAnswered(tool.output);
    if (!tool.denied && tool.output?.editedInput !== undefined) return this.settleEdited(tool);
    const expired = tool.denied && tool.deniedReason === EXPIRED_REASON;
    const timedOut = tool.denied && tool.deniedReason.startsWith(TIMED_OUT);
    this.title(expired ? "Expired" : timedOut ? "Timed out" : tool.denied ? "Denied" : "Approved");
    const text = expired
      ? EXPIRED_TEXT
      : timedOut
        ? `${tool.deniedReason} The call did not run; the assistant continues.`
        : tool.denied
          ? `Denied${tool.deniedReason ? `: ${tool.deniedReason}` : "."}`
          : "Approved";
    this.show(h("p", { class: "outcome", tabindex: "-1" }, text));
  }

  /** Approved with an input a person edited: show what the call ran with. */
  settleEdited(tool) {
    this.edited = true;
    this.title("Approved with changes");
    this.show(
      h("p", { class: "outcome", tabindex: "-1" },
        "Approved with changes: a person edited the request before approving it. It ran with:"),
      h("pre", { class: "tool-input edited-input" },
        h("code", {}, JSON.stringify(tool.output.editedInput, null, 2))));
  }

  /** A call in doubt was answered (here or in the admin): show the outcome it has now. */
  settleInDoubt(tool) {
    if (tool.denied) {
      this.title(tool.deniedReason === EXPIRED_REASON ? "Expired" : ANSWERS.failed.title);
      const reason = tool.deniedReason ? `: ${tool.deniedReason}` : ".";
      this.show(h("p", { class: "outcome", tabindex: "-1" }, `Marked failed${reason}`));
      return;
    }
    this.title(ANSWERS[this.answer]?.title || "Settled");
    this.show(
      h("p", { class: "outcome", tabindex: "-1" }, tool.error ? "Settled as failed" : "Settled"),
      tool.output === undefined ? "" : h("pre", { class: "tool-input recorded-result" },
        h("code", {}, JSON.stringify(tool.output, null, 2))));
  }
}

// -- the fields of an answer -----------------------------------------------------------------

const SIMPLE_TYPES = new Set(["string", "integer", "number", "boolean"]);

/** One text box: the answer is its text. */
function textField(id) {
  const box = h("textarea", { id: `${id}-answer`, rows: "3" });
  return {
    elements: [h("label", { for: box.id }, "Your answer"), box],
    read() {
      if (!box.value.trim()) throw new Error("Write your answer first.");
      return box.value.trim();
    },
  };
}

/**
 * Fields for an object schema whose properties are strings, numbers, booleans or enums;
 * any other schema gets one JSON box. read() builds the answer (the server checks it).
 */
function schemaFields(schema, id) {
  const properties = Object.entries(schema.properties || {});
  const simple = schema.type === "object" && properties.length &&
    properties.every(([, p]) => p.enum || SIMPLE_TYPES.has(p.type));
  if (!simple) {
    const box = h("textarea", { id: `${id}-answer`, rows: "4", class: "result-input" });
    return {
      elements: [h("label", { for: box.id }, "Your answer (JSON)"), box],
      read() {
        try {
          return JSON.parse(box.value);
        } catch {
          throw new Error("Your answer: enter it as JSON (text in double quotes).");
        }
      },
    };
  }
  const required = new Set(schema.required || []);
  const inputs = properties.map(([name, property]) => {
    const inputId = `${id}-answer-${name}`;
    const input = property.enum
      ? h("select", { id: inputId }, h("option", { value: "" }, "—"),
        ...property.enum.map((v) => h("option", { value: JSON.stringify(v) }, String(v))))
      : property.type === "boolean"
        ? h("input", { id: inputId, type: "checkbox" })
        : h("input", { id: inputId, type: property.type === "string" ? "text" : "number",
          step: property.type === "integer" ? "1" : "any" });
    const label = `${property.title || name}${required.has(name) ? "" : " (optional)"}`;
    return { name, property, input, element: h("p", { class: "answer-field" },
      h("label", { for: inputId }, label), input) };
  });
  return {
    elements: inputs.map((i) => i.element),
    read() {
      const answer = {};
      for (const { name, property, input } of inputs) {
        if (property.type === "boolean" && !property.enum) answer[name] = input.checked;
        else if (input.value === "") continue; // left out: the server names it if required
        else if (property.enum) answer[name] = JSON.parse(input.value);
        else if (property.type === "string") answer[name] = input.value;
        else answer[name] = Number(input.value);
      }
      return answer;
    },
  };
}

// -- the parts of one agent (the run's, or a sub-agent's) ------------------------------------

class Scope {
  constructor(conversation, path, container) {
    this.conversation = conversation;
    this.path = path;
    this.container = container;
    this.steps = new Map(); // step index → its element
    this.step = null; // the element parts go into
    this.text = null; // the paragraph text-deltas extend
    this.tools = new Map(); // toolCallId → ToolCall
  }

  handle(part) {
    switch (part.type) {
      case "step-start":
        return this.startStep(part.step);
      case "text-delta":
        return this.appendText(part.text);
      case "tool-state":
      case "tool-result":
        return this.tool(part.toolCallId, part.toolName).update(part);
      case "tool-call":
        return this.tool(part.toolCallId, part.toolName);
      case "tool-approval-request":
        return this.conversation.requestApproval(this, part);
      case "sub-agent":
        return this.conversation.scope(part.agentPath).handle(part.part);
      case "error":
        return this.current().append(h("p", { class: "form-error" }, part.message));
      default:
        return undefined; // start, step-finish, finish, input deltas: nothing to draw
    }
  }

  startStep(index) {
    const seen = this.steps.get(index);
    if (seen) {
      // A crash-continued step: forget its partial text, tools and cards (SPEC R11.13).
      seen.remove();
      this.conversation.forgetDetached();
    }
    this.step = h("div", { class: "step", "data-step": String(index) });
    this.steps.set(index, this.step);
    this.container.append(this.step);
    this.text = null;
  }

  current() {
    if (!this.step) {
      this.step = h("div", { class: "step" });
      this.container.append(this.step);
    }
    return this.step;
  }

  appendText(text) {
    if (!this.text) {
      this.text = h("p", { class: "text" });
      this.current().append(this.text);
    }
    this.text.append(text);
  }

  tool(id, name) {
    let tool = this.tools.get(id);
    if (!tool) {
      tool = new ToolCall(name);
      this.tools.set(id, tool);
      const step = this.current();
      let list = step.lastElementChild;
      if (!list?.classList.contains("tools")) {
        list = h("ul", { class: "tools", "aria-label": "Tool activity" });
        step.append(list);
      }
      list.append(tool.el);
      this.text = null; // text after a tool starts a new paragraph
    }
    return tool;
  }
}

// -- one conversation (one run) --------------------------------------------------------------

class Conversation {
  constructor(chat, runId, question) {
    this.chat = chat;
    this.runId = runId;
    this.question = question;
    this.lastSeq = -1;
    this.status = null; // the run's status as last reported
    this.stop = null; // {by, reason, requestedAt, stoppedAt}: a stop asked for, as listed
    this.stopChecks = 0; // listed the run again this many times for its stop to take effect
    this.legOpen = false;
    this.finishReason = null;
    this.error = "";
    this.answer = h("div", { class: "answer" });
    this.queue = h("div", { class: "queued-inputs" }); // sent, not delivered yet: last
    this.el = h("div", { class: "conversation" },
      h("article", { class: "msg user", "aria-label": "You" }, h("p", {}, question)),
      h("article", { class: "msg assistant", "aria-label": "Assistant" }, this.answer),
      this.queue);
    this.queued = new Map(); // inputId → {el, note}: sent, not delivered yet
    this.unacknowledged = []; // inputIds sent, not yet answered by the server, oldest first
    this.delivered = new Set(); // inputIds shown where the model read them
    this.root = new Scope(this, [], this.answer);
    this.scopes = new Map([["", this.root]]);
    this.cards = new Map(); // approvalId → ApprovalCard
    this.sent = []; // cards whose verdict awaits the server's answer, oldest first
    this.checks = 0; // asked the server about undecided cards this many times in a row
    this.checking = null;
  }

  /** A frame carrying a seq: a part, or the end of a leg. Repeats are dropped. */
  receive(frame) {
    if (frame.seq <= this.lastSeq) return;
    this.lastSeq = frame.seq;
    if (frame.type === "done") {
      this.legOpen = false;
      this.stopChecks = 0; // a stop asked for meanwhile takes effect now
      for (const scope of this.scopes.values()) for (const tool of scope.tools.values()) tool.pause();
      this.checkApprovals();
      this.chat.refreshConversations();
      return;
    }
    const part = frame.part;
    this.legOpen = true;
    if (part.type === "finish") this.finishReason = part.finishReason;
    if (part.type === "error") this.error = part.message;
    if (part.type === "start" || part.type === "step-start") this.error = "";
    if (part.type === "data-input-delivered") return this.inputDelivered(part.payload);
    this.root.handle(part);
  }

  /** Whether what the user types now goes to this run: it answers, or waits for them. */
  steerable() {
    if (this.status === "completed" || this.status === "stopped") return false;
    return this.legOpen || [...this.cards.values()].some((c) => c.open);
  }

  /** Send the run input; shown as queued until a step boundary delivers it. */
  steer(text) {
    const inputId = newRunId();
    if (!this.chat.send({ type: "input", runId: this.runId, text, inputId })) return false;
    this.unacknowledged.push(inputId);
    this.showQueued(inputId, text, "Sending…");
    return true;
  }

  showQueued(inputId, text, status) {
    if (this.queued.has(inputId) || this.delivered.has(inputId)) return;
    const note = h("p", { class: "input-status" }, status);
    const el = h("article", { class: "msg user queued", "aria-label": "You (queued)" },
      h("p", {}, text), note);
    this.queued.set(inputId, { el, note });
    this.queue.append(el);
  }

  inputQueued(frame) {
    this.unacknowledged = this.unacknowledged.filter((id) => id !== frame.inputId);
    const waiting = this.queued.get(frame.inputId);
    if (waiting) setText(waiting.note, "Queued — read at the assistant's next step");
  }

  inputRefused(frame) {
    const waiting = this.queued.get(this.unacknowledged.shift());
    if (!waiting) return;
    waiting.el.classList.add("refused");
    waiting.el.setAttribute("aria-label", "You (not sent)");
    setText(waiting.note, `Not sent: ${frame.message}`);
  }

  /**
   * A step boundary gave the model this input: the message moves to where it was read,
   * and the step that follows answers below it. A step re-run after a crash delivers it
   * again: shown once.
   */
  inputDelivered(payload) {
    if (this.delivered.has(payload.inputId)) return;
    this.delivered.add(payload.inputId);
    const waiting = this.queued.get(payload.inputId);
    this.queued.delete(payload.inputId);
    const el = waiting?.el ?? h("article", {}, h("p", {}, payload.text));
    waiting?.note.remove();
    el.className = "msg user";
    el.setAttribute("aria-label", "You");
    const answer = this.root.container;
    const step = this.root.step;
    if ([...answer.children].every((child) => child === step)) {
      this.el.insertBefore(el, answer.closest("article")); // nothing answered yet
      return;
    }
    const next = h("div", { class: "answer" });
    this.el.insertBefore(el, this.queue);
    this.el.insertBefore(h("article", { class: "msg assistant", "aria-label": "Assistant" }, next),
      this.queue);
    this.root.container = next;
    if (step?.isConnected) next.append(step); // the step delivering it answers it
  }

  /** The run's inputs still queued (after a reload), from the REST API. */
  async loadQueued(url) {
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      if (!response.ok) return;
      for (const input of (await response.json()).results) {
        if (input.status === "queued") this.showQueued(input.inputId, input.text, "Queued — read at the assistant's next step");
      }
    } catch {
      // the server is away: queued inputs show once delivered
    }
  }

  scope(path) {
    const key = path.join("/");
    let scope = this.scopes.get(key);
    if (!scope) {
      const parent = this.scope(path.slice(0, -1));
      // A sub-agent's parts go inside the call of the tool that runs it.
      const caller = [...parent.tools.values()].reverse().find((t) => t.name === path.at(-1));
      const box = h("div", { class: "sub-agent", role: "group", "aria-label": `Agent ${path.join(" › ")}` },
        h("p", { class: "sub-agent-name" }, path.join(" › ")));
      (caller ? caller.el : parent.current()).append(box);
      scope = new Scope(this, path, box);
      this.scopes.set(key, scope);
    }
    return scope;
  }

  /** Drop what a discarded step held: tool calls, sub-agents and cards no longer shown. */
  forgetDetached() {
    for (const [key, scope] of this.scopes) {
      if (key && !scope.container.isConnected) this.scopes.delete(key);
      for (const [id, tool] of scope.tools) if (!tool.el.isConnected) scope.tools.delete(id);
    }
    for (const [id, card] of this.cards) if (!card.el.isConnected) this.cards.delete(id);
  }

  requestApproval(scope, part) {
    // A sub-agent's request arrives twice: inside its sub-agent parts and bubbled up.
    if (this.cards.has(part.approvalId)) return;
    this.checks = 0;
    const path = part.agentPath || scope.path;
    const card = new ApprovalCard(this, part, path);
    this.cards.set(part.approvalId, card);
    const tool = scope.tools.get(part.toolCallId);
    (tool ? tool.el : scope.current()).append(card.el);
    if (tool) {
      tool.card = card;
      tool.render();
    }
    this.checkApprovals();
  }

  unchecked() {
    return [...this.cards.values()].filter((c) => !c.known);
  }

  /** Ask the page's JSON endpoint which undecided cards this user may decide. */
  checkApprovals() {
    if (this.checking || !this.unchecked().length) return;
    this.checking = this.askServer().finally(() => {
      this.checking = null;
    });
  }

  /** The run's approvals as the server sees them now (none while it is away). */
  async fetchApprovals() {
    try {
      const response = await fetch(this.chat.approvalsUrl(this.runId), { headers: { Accept: "application/json" } });
      if (response.ok) return (await response.json()).approvals;
    } catch {
      // the server is away (a restart): the caller asks again
    }
    return [];
  }

  /** A card's deadline passed: show what it did (escalated: a new deadline). */
  async recheckDeadline(card) {
    if (!card.open || this.chat.current !== this) return;
    const info = (await this.fetchApprovals()).find((a) => a.approvalId === card.part.approvalId);
    if (!info || !card.open) return;
    if (info.status === "pending") card.showDeadline(info);
    else card.record(info.status); // timed out: the run's parts say how it goes on
  }

  async askServer() {
    const approvals = await this.fetchApprovals();
    const known = new Map(approvals.map((a) => [a.approvalId, a]));
    for (const card of this.unchecked()) {
      const info = known.get(card.part.approvalId);
      if (!info) continue;
      card.offer(info);
      if (card.state === "offered") this.chat.focusCard(card);
    }
    this.chat.updateRunStatus();
    // The row is written with the leg's last checkpoint, which may follow the part a little.
    if (this.unchecked().length && this.checks++ < APPROVAL_RETRIES && this.chat.current === this) {
      setTimeout(() => this.checkApprovals(), 500);
    }
  }

  /** verdict: {approved, reason, result?} — `result` answers a call in doubt "it happened". */
  decide(card, verdict) {
    const frame = { type: "approval-response", runId: this.runId, approvalId: card.part.approvalId, ...verdict };
    if (verdict.approved) frame.token = card.part.token; // the signed token, echoed as it came
    if (!this.chat.send(frame)) return false;
    this.sent.push(card);
    return true;
  }

  recorded(frame) {
    const card = this.cards.get(frame.approvalId);
    this.sent = this.sent.filter((c) => c !== card);
    card?.record(frame.status);
  }

  refused(frame) {
    const card = this.sent.shift();
    if (frame.code === "approval_already_decided") card?.record("was decided already");
    else card?.refused(frame.message);
  }

  /**
   * The run as the conversation list has it. A stop shows once it took effect: as the leg
   * holding the run ends, just after the leg's last part; until then, list it again.
   */
  listed(run) {
    this.stop = run.stop;
    this.status = run.status;
    if (run.status !== "stopped" && run.status !== "completed" && run.stop && !this.legOpen &&
      this.stopChecks++ < STOP_RETRIES) {
      setTimeout(() => this.chat.refreshConversations(), 500);
    }
  }

  describe() {
    // First: a stop ends the leg with an error part, and cancels the calls it waited on.
    if (this.status === "stopped") return describeStop(this.stop);
    const open = [...this.cards.values()].filter((c) => c.open);
    if (open.some((c) => c.state === "offered" && c.question)) return "Waiting for your answer";
    if (open.some((c) => c.state === "offered")) return "Waiting for your approval";
    if (open.some((c) => c.state === "staff")) return "Waiting for staff approval";
    if (this.error) return `Something went wrong: ${this.error}`;
    if (!this.legOpen && (this.finishReason === "stop" || this.status === "completed")) return "Answer complete";
    const running = [...this.scopes.values()]
      .flatMap((s) => [...s.tools.values()])
      .findLast((t) => t.state === "executing" && !t.paused);
    if (running) return `Running ${running.name}…`;
    if (this.legOpen || this.status === "running") return "The assistant is answering…";
    return "";
  }
}

// -- the element -------------------------------------------------------------------------------

let instances = 0;

class DeuzChat extends HTMLElement {
  connectedCallback() {
    if (this.ui) return; // moved in the page: already running
    instances += 1;
    const prefix = this.id || `deuz-chat-${instances}`;
    const socketPath = this.getAttribute("socket") || "/ws/deuz/";
    this.config = {
      agent: this.getAttribute("agent"),
      runsUrl: this.getAttribute("runs-url"),
      approvalsUrl: this.getAttribute("approvals-url"),
      wsUrl: new URL(socketPath, location.href).href.replace(/^http/, "ws"),
      loginUrl: this.getAttribute("login-url"),
      runId: this.getAttribute("run"),
      runTitle: this.getAttribute("run-title"),
    };
    this.current = null; // the Conversation shown
    this.socket = null;
    this.attempts = 0;
    this.titles = new Map(); // runId → title, for opening a conversation from the URL
    this.listing = null; // the conversation list's request in flight
    this.relist = false; // asked again meanwhile: the answer in flight may be stale
    this.render(prefix);
    this.openFromUrl().then(() => this.connect());
    this.onPopState = () => this.openFromUrl();
    window.addEventListener("popstate", this.onPopState);
  }

  disconnectedCallback() {
    queueMicrotask(() => {
      if (this.isConnected) return; // only moved
      window.removeEventListener("popstate", this.onPopState);
      this.closed = true;
      this.socket?.close();
    });
  }

  /** The element's markup; the page's slot="welcome" children go into the welcome. */
  render(prefix) {
    const id = (name) => `${prefix}-${name}`;
    const given = [...this.querySelectorAll(':scope > [slot="welcome"]')];
    const welcome = h("div", { class: "welcome", id: id("welcome") },
      ...(given.length ? given : [h("p", {}, "Ask a question to start a conversation.")]));
    // A conversation to show: no welcome meanwhile, nor a "new conversation" heading.
    const runId = new URLSearchParams(location.search).get("run");
    welcome.hidden = Boolean(runId);
    const placeholder = this.getAttribute("placeholder") || "";
    const ui = {
      heading: h("h2", { id: id("heading"), class: "heading", tabindex: "-1" },
        runId ? (runId === this.config.runId && this.config.runTitle) || "Conversation" : "New conversation"),
      connection: h("p", { class: "connection", role: "status", "aria-live": "polite" }),
      welcome,
      transcript: h("div", { class: "transcript", id: id("transcript"), role: "log",
        "aria-labelledby": id("heading") }, welcome),
      runStatus: h("p", { class: "run-status", role: "status", "aria-live": "polite" }),
      message: h("textarea", { id: id("message"), name: "message", rows: "2", required: true,
        placeholder }),
      sendButton: h("button", { type: "submit", class: "primary", disabled: true }, "Send"),
      list: h("ul", { class: "conversation-list" }),
      noConversations: h("p", { class: "muted no-conversations", id: id("no-conversations"),
        hidden: true }, "No conversations yet."),
      newConversation: h("button", { type: "button", class: "primary new-conversation" },
        "New conversation"),
    };
    ui.composer = h("form", { class: "composer" },
      h("label", { for: ui.message.id }, "Your question"),
      h("div", { class: "composer-row" }, ui.message, ui.sendButton));
    ui.stopReason = h("textarea", { id: id("stop-reason"), rows: "2" });
    ui.stopForm = h("form", { class: "stop-form", hidden: true },
      h("label", { for: ui.stopReason.id }, "Why are you stopping it?"), ui.stopReason,
      h("div", { class: "buttons" },
        h("button", { type: "submit", class: "danger" }, "Stop the run"),
        h("button", { type: "button", onclick: () => this.closeStopForm() }, "Keep it running")));
    ui.stopBar = h("div", { class: "stop-bar", hidden: true },
      h("button", { type: "button", class: "danger", onclick: () => this.stopRun("") }, "Stop"),
      h("button", { type: "button", "aria-expanded": "false", "aria-controls": ui.stopForm.id,
        onclick: () => this.openStopForm() }, "Stop and say why…"));
    ui.stopForm.id = id("stop-form");
    ui.stopBar.lastElementChild.setAttribute("aria-controls", ui.stopForm.id);
    const listed = Boolean(this.config.runsUrl);
    ui.nav = listed
      ? h("nav", { id: id("conversations"), class: "conversations",
        "aria-labelledby": id("conversations-heading") },
      h("h2", { id: id("conversations-heading") }, "Conversations"),
      ui.newConversation, ui.list, ui.noConversations)
      : "";
    ui.navToggle = listed
      ? h("button", { type: "button", class: "nav-toggle", "aria-controls": id("conversations"),
        "aria-expanded": "false" }, "Conversations")
      : h("button", { type: "button", class: "new-conversation" }, "New conversation");
    if (!listed) ui.newConversation = ui.navToggle;
    ui.layout = h("div", { class: listed ? "layout" : "layout single" },
      ui.nav,
      h("section", { class: "chat", "aria-labelledby": id("heading") },
        h("div", { class: "chat-bar" }, ui.navToggle, ui.heading, ui.connection),
        ui.transcript, ui.runStatus, ui.stopBar, ui.stopForm, ui.composer));
    this.ui = ui;
    this.replaceChildren(ui.layout);
    this.wire();
  }

  wire() {
    const { ui } = this;
    ui.composer.addEventListener("submit", (event) => {
      event.preventDefault();
      const text = ui.message.value.trim();
      if (!text) return;
      // A run that answers or waits takes what is typed now; otherwise it starts a new one.
      if (!this.current?.steerable()) return this.ask(text);
      if (this.current.steer(text)) ui.message.value = "";
      this.updateRunStatus();
    });
    ui.stopForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.stopRun(ui.stopReason.value.trim());
    });
    ui.message.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey) {
        event.preventDefault();
        ui.composer.requestSubmit();
      }
    });
    ui.welcome.addEventListener("click", (event) => {
      const prompt = event.target.closest("[data-prompt]");
      if (!prompt) return;
      event.preventDefault();
      ui.message.value = prompt.dataset.prompt || prompt.textContent.trim();
      ui.composer.requestSubmit();
    });
    ui.newConversation.addEventListener("click", () => {
      this.show(null);
      ui.message.focus();
    });
    if (ui.navToggle !== ui.newConversation) {
      ui.navToggle.addEventListener("click", () => {
        const opened = ui.layout.classList.toggle("nav-open");
        ui.navToggle.setAttribute("aria-expanded", String(opened));
        if (opened) ui.newConversation.focus();
      });
      // Escape closes the list a narrow screen opened over the chat.
      ui.nav.addEventListener("keydown", (event) => {
        if (event.key !== "Escape" || !ui.layout.classList.contains("nav-open")) return;
        ui.layout.classList.remove("nav-open");
        ui.navToggle.setAttribute("aria-expanded", "false");
        ui.navToggle.focus();
      });
    }
  }

  inputsUrl(runId) {
    const base = this.config.runsUrl.split("?")[0];
    return `${base}${encodeURIComponent(runId)}/inputs/`;
  }

  approvalsUrl(runId) {
    return this.config.approvalsUrl.replace("RUN_ID", encodeURIComponent(runId));
  }

  // -- the socket ------------------------------------------------------------------------------

  get online() {
    return this.socket?.readyState === WebSocket.OPEN;
  }

  /** Send a frame when connected; on reconnecting the element subscribes again by itself. */
  sendQuietly(frame) {
    if (this.online) this.socket.send(JSON.stringify(frame));
  }

  /** Send a frame the user asked for; offline, say so. */
  send(frame) {
    if (!this.online) {
      setText(this.ui.runStatus, "Not connected — try again in a moment.");
      return false;
    }
    this.socket.send(JSON.stringify(frame));
    return true;
  }

  connect() {
    if (this.closed) return;
    const socket = new WebSocket(this.config.wsUrl);
    this.socket = socket;
    socket.addEventListener("open", () => {
      this.attempts = 0;
      setText(this.ui.connection, "");
      this.ui.sendButton.disabled = false;
      // Continue where this page left off: the server replays everything after lastSeq.
      const { current } = this;
      if (current) this.sendQuietly({ type: "subscribe", runId: current.runId, lastSeq: current.lastSeq });
      this.refreshConversations();
    });
    socket.addEventListener("message", (event) => this.onFrame(JSON.parse(event.data)));
    socket.addEventListener("close", (event) => {
      if (this.closed) return;
      if (event.code === 4401) return this.signIn();
      this.ui.sendButton.disabled = true; // enabled again once connected
      setText(this.ui.connection, "Reconnecting…");
      const delay = Math.min(4000, 250 * 2 ** this.attempts) * (0.8 + Math.random() * 0.4);
      this.attempts += 1;
      setTimeout(() => this.connect(), delay);
    });
  }

  /** Nobody is signed in (any more): to the login page, or say so. */
  signIn() {
    const { loginUrl } = this.config;
    if (loginUrl) {
      location.assign(`${loginUrl}?next=${encodeURIComponent(location.pathname + location.search)}`);
    } else {
      setText(this.ui.connection, "Sign in to chat.");
    }
  }

  onFrame(frame) {
    const { current } = this;
    if (frame.type === "error") {
      if (frame.frame === "approval-response" && current) current.refused(frame);
      else if (frame.frame === "input" && current) current.inputRefused(frame);
      else if (frame.code !== "rate_limited" && current) current.error = frame.message;
    } else if (!current || frame.runId !== current.runId) {
      return; // a frame of a conversation no longer shown
    } else if (frame.type === "started" || frame.type === "subscribed") {
      current.status = frame.status;
      if (frame.type === "started") this.refreshConversations();
    } else if (frame.type === "approval-recorded") {
      current.recorded(frame);
    } else if (frame.type === "input-queued") {
      current.inputQueued(frame);
    } else if (frame.type === "stop-requested") {
      current.status = frame.status;
      this.refreshConversations(); // who stopped it, and why, as listed
    } else if ("seq" in frame) {
      const follow = this.isScrolledDown();
      current.receive(frame);
      if (follow) this.ui.transcript.scrollTop = this.ui.transcript.scrollHeight;
    }
    this.updateRunStatus();
  }

  updateRunStatus() {
    const { current, ui } = this;
    setText(ui.runStatus, current ? current.describe() : "");
    ui.transcript.setAttribute("aria-busy", String(Boolean(current?.legOpen)));
    const stoppable = Boolean(current?.steerable());
    ui.stopBar.hidden = !stoppable;
    if (!stoppable) this.closeStopForm();
  }

  /** Stop the run shown, for good (``reason``: why, kept with the run). */
  stopRun(reason) {
    const { current } = this;
    if (!current || !this.send({ type: "stop", runId: current.runId, reason })) return;
    this.closeStopForm();
    setText(this.ui.runStatus, "Stopping…");
  }

  openStopForm() {
    const { ui } = this;
    ui.stopForm.hidden = false;
    ui.stopBar.lastElementChild.setAttribute("aria-expanded", "true");
    ui.stopReason.focus();
  }

  closeStopForm() {
    const { ui } = this;
    if (ui.stopForm.hidden) return;
    ui.stopForm.hidden = true;
    ui.stopReason.value = "";
    ui.stopBar.lastElementChild.setAttribute("aria-expanded", "false");
  }

  isScrolledDown() {
    const t = this.ui.transcript;
    return t.scrollHeight - t.scrollTop - t.clientHeight < 80;
  }

  /** Bring a card that just got its buttons to the keyboard, unless the user is busy. */
  focusCard(card) {
    const active = document.activeElement;
    const { ui } = this;
    const idle = !active || active === document.body || active === ui.heading ||
      (ui.composer.contains(active) && !ui.message.value);
    if (idle) card.el.focus();
  }

  // -- conversations ---------------------------------------------------------------------------

  /** Show a conversation, or (null) the welcome text of a new one. */
  show(conversation, { push = true } = {}) {
    const { current, ui } = this;
    if (current && current !== conversation) this.sendQuietly({ type: "unsubscribe", runId: current.runId });
    this.current = conversation;
    ui.welcome.hidden = false; // hidden only while the page loads a conversation
    ui.transcript.replaceChildren(conversation ? conversation.el : ui.welcome);
    setText(ui.heading, conversation ? conversation.question : "New conversation");
    if (push) history.pushState(null, "", pageUrl(conversation?.runId));
    this.markSelected();
    this.updateRunStatus();
    ui.layout.classList.remove("nav-open");
    ui.navToggle.setAttribute("aria-expanded", "false");
    this.dispatchEvent(new CustomEvent("deuz-chat:conversation", { bubbles: true,
      detail: { runId: conversation?.runId ?? null, title: conversation?.question ?? null } }));
  }

  open(runId, title, { push = true } = {}) {
    if (this.current?.runId === runId) return;
    const conversation = new Conversation(this, runId, title);
    this.show(conversation, { push });
    this.sendQuietly({ type: "subscribe", runId, lastSeq: -1 }); // a fresh view renders from the start
    if (this.config.runsUrl) conversation.loadQueued(this.inputsUrl(runId));
    if (push) this.ui.heading.focus(); // the user picked it: take them there
  }

  ask(text) {
    const conversation = new Conversation(this, newRunId(), text);
    const frame = { type: "start", agent: this.config.agent, runId: conversation.runId, text,
      title: text.slice(0, 200) };
    if (!this.send(frame)) return;
    this.show(conversation);
    this.ui.message.value = "";
  }

  async openFromUrl() {
    const runId = new URLSearchParams(location.search).get("run");
    if (!runId) return this.show(null, { push: false });
    // The page came with its conversation's title; another one's comes from the list.
    const loaded = runId === this.config.runId ? this.config.runTitle : null;
    if (!loaded && !this.titles.has(runId)) await this.refreshConversations();
    return this.open(runId, this.titles.get(runId) || loaded || "Conversation", { push: false });
  }

  refreshConversations() {
    if (!this.config.runsUrl) return Promise.resolve();
    if (this.listing) {
      this.relist = true;
      return this.listing;
    }
    this.listing = this.loadConversations().finally(() => {
      this.listing = null;
      if (this.relist) {
        this.relist = false;
        this.refreshConversations();
      }
    });
    return this.listing;
  }

  async loadConversations() {
    const query = `agent=${encodeURIComponent(this.config.agent)}&pageSize=50`;
    const url = `${this.config.runsUrl}${this.config.runsUrl.includes("?") ? "&" : "?"}${query}`;
    try {
      const response = await fetch(url, { headers: { Accept: "application/json" } });
      if (response.status === 401 || response.status === 403) this.signIn();
      else if (response.ok) this.renderConversations((await response.json()).results);
    } catch {
      // the server is away (a restart): the list refreshes once the socket is back
    }
  }

  renderConversations(runs) {
    const { ui } = this;
    ui.noConversations.hidden = runs.length > 0;
    ui.list.replaceChildren(...runs.map((run) => {
      const title = run.title || "(untitled)";
      this.titles.set(run.runId, title);
      const link = h("a", { href: `?run=${encodeURIComponent(run.runId)}`, "data-run": run.runId },
        h("span", { class: "title" }, title),
        h("span", { class: "badge", "data-status": run.status }, statusLabel(run)));
      link.addEventListener("click", (event) => {
        event.preventDefault();
        this.open(run.runId, title);
      });
      return h("li", {}, link);
    }));
    const shown = this.current && runs.find((run) => run.runId === this.current.runId);
    if (shown) this.current.listed(shown);
    this.markSelected();
    this.updateRunStatus();
  }

  markSelected() {
    for (const link of this.ui.list.querySelectorAll("a")) {
      if (link.dataset.run === this.current?.runId) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
  }
}

/** This page's address showing `runId` (none: the new-conversation page); other query
 * parameters of the page are kept. */
function pageUrl(runId) {
  const url = new URL(location.href);
  if (runId) url.searchParams.set("run", runId);
  else url.searchParams.delete("run");
  return url.pathname + url.search + url.hash;
}

/** A conversation's badge: a run waiting only on questions waits for an answer. */
function statusLabel(run) {
  const kinds = (run.pendingApprovals || []).map((approval) => approval.kind);
  if (run.status === "suspended" && kinds.length && kinds.every((kind) => kind === "question")) {
    return "Waiting for an answer";
  }
  return STATUS_LABELS[run.status] || run.status;
}

function setText(element, text) {
  if (element.textContent !== text) element.textContent = text; // unchanged: no re-announcement
}

if (!customElements.get("deuz-chat")) customElements.define("deuz-chat", DeuzChat);
