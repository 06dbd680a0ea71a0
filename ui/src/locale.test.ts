import { afterEach, describe, expect, it, vi } from "vitest";

describe("locale guard", () => {
  afterEach(() => {
    vi.unstubAllGlobals();
    vi.resetModules();
  });

  it("replaces a language Intl cannot use (LANG=C)", async () => {
    vi.stubGlobal("navigator", { language: "C", languages: ["C"] });
    expect(() => new Intl.NumberFormat(navigator.language)).toThrow();
    await import("./locale");
    expect(navigator.language).toBe("en-US");
    expect(navigator.languages).toEqual(["en-US"]);
  });

  it("keeps a usable language", async () => {
    vi.stubGlobal("navigator", { language: "fr-FR", languages: ["fr-FR"] });
    await import("./locale");
    expect(navigator.language).toBe("fr-FR");
  });
});
