// The login link carries the token after '#', which never reaches a server or its logs:
// fill it in and sign in with a POST (no state changes on GET).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const hash = new URLSearchParams(window.location.hash.slice(1));
  if (window.location.hash === "#failed") {
    document.getElementById("login-failed").hidden = false;
    return;
  }
  const token = hash.get("token");
  if (token) {
    history.replaceState(null, "", window.location.pathname);
    document.getElementById("token").value = token;
    document.getElementById("login-form").submit();
  }
});
