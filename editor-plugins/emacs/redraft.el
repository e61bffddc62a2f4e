;;; redraft.el --- redraft inline completion through lsp-mode  -*- lexical-binding: t; -*-

;; Needs lsp-mode 10.0.0 or newer (it brings lsp-inline-completion.el). Put this file on the
;; load-path and (require 'redraft), or paste its forms into your init file.

;;; Code:

(defgroup redraft nil
  "Inline code completion from `redraft lsp'."
  :group 'tools)

(defcustom redraft-command '("redraft" "lsp")
  "The command that starts the redraft language server."
  :type '(repeat string))

(defcustom redraft-settings '(:effort "medium" :maxTokens 64 :logLevel "info")
  "Sent as initializationOptions (see the redraft README for every key)."
  :type 'plist)

(with-eval-after-load 'lsp-mode
  (lsp-register-client
   (make-lsp-client
    :new-connection (lsp-stdio-connection (lambda () redraft-command))
    ;; Any buffer lsp-mode manages; the server's `languages' setting narrows it down.
    :activation-fn (lambda (&rest _) t)
    ;; Runs next to the language's own server instead of replacing it.
    :add-on? t
    :priority -1
    :server-id 'redraft
    :initialization-options (lambda () redraft-settings)))
  ;; Ask for suggestions shortly after typing stops (lsp-mode's default waits 2 s).
  (setq lsp-inline-completion-enable t
        lsp-inline-completion-idle-delay 0.3))

(with-eval-after-load 'lsp-inline-completion
  ;; Tab accepts, as in the other editors; M-] / M-[ cycle candidates, C-g dismisses. A
  ;; graphical Emacs sends <tab>, a terminal TAB, which the map's default binding would turn
  ;; into a cancel: bind both.
  (define-key lsp-inline-completion-active-map (kbd "<tab>") #'lsp-inline-completion-accept)
  (define-key lsp-inline-completion-active-map (kbd "TAB") #'lsp-inline-completion-accept)
  (define-key lsp-inline-completion-active-map (kbd "M-]") #'lsp-inline-completion-next)
  (define-key lsp-inline-completion-active-map (kbd "M-[") #'lsp-inline-completion-prev))

;; Ask now, with several candidates (an explicitly invoked completion): in lsp-mode buffers
;; only, so M-\ keeps `delete-horizontal-space' everywhere else.
(with-eval-after-load 'lsp-mode
  (define-key lsp-mode-map (kbd "M-\\") #'lsp-inline-completion-display))

(provide 'redraft)
;;; redraft.el ends here
