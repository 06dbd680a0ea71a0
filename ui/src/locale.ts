// Under LANG=C the web view reports the language "C", which is not a BCP 47
// tag: `Intl` then throws, and libraries that format numbers at load time
// (uPlot) would stop the whole window from starting. An unusable language
// is replaced by "en-US" before anything else loads.

function usable(tag: string): boolean {
  try {
    new Intl.NumberFormat(tag);
    return true;
  } catch {
    return false;
  }
}

if (typeof navigator !== "undefined" && !usable(navigator.language)) {
  Object.defineProperty(navigator, "language", { value: "en-US", configurable: true });
  Object.defineProperty(navigator, "languages", { value: ["en-US"], configurable: true });
}

export {};
