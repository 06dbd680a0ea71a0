import { advantageColour, roleLabel, signed } from "../format";
import type { EpisodeMessage, TokenRole } from "../types";

const roles: TokenRole[] = ["action", "env", "user", "context", "warning"];

/** Every token of the episode, coloured by role; its background shows the
 * advantage training gives it. */
export function TokenView({ messages, tokenText }: { messages: EpisodeMessage[]; tokenText: boolean }) {
  return (
    <div className="token-view" data-testid="token-view">
      <div className="legend-row">
        {roles.map((r) => (
          <span key={r} className={`tok role-${r}`}>{roleLabel[r]}</span>
        ))}
        <span className="tok" style={{ background: advantageColour(0.8) }}>advantage +</span>
        <span className="tok" style={{ background: advantageColour(-0.8) }}>advantage −</span>
      </div>
      {!tokenText && <p className="muted">No model is loaded, so tokens show as ids.</p>}
      {messages.map((m) => (
        <div key={m.id} className="token-msg">
          <div className="muted">{m.role} · message {m.id} · {m.tokens.length} tokens</div>
          <p>
            {m.tokens.map((t, i) => (
              <span
                key={i}
                className={`tok role-${t.role}`}
                data-role={t.role}
                style={{ background: advantageColour(t.advantage) }}
                title={`${t.role}${t.advantage != null ? ` · advantage ${signed(t.advantage)}` : ""}`}
              >
                {t.piece}
              </span>
            ))}
          </p>
        </div>
      ))}
    </div>
  );
}
